// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pcicfg"
)

// The real lspci (Debian pciutils) is the referee of the config-space
// parser: it reads /sys/bus/pci/devices/*/config of the GPU fixture hosts
// in a private mount namespace, and the ACSCtl it decodes for every bridge
// the exporter reports must be the register the exporter exports, and
// the redirect verdict must follow from it; the DevCtl MaxPayload and
// MaxReadReq it decodes for every RDMA device's function must be the
// exporter's rdma_device_pcie_max_{payload,read_request}_bytes.
func TestLspciAgrees(t *testing.T) {
	requireTool(t, "lspci")
	requireTool(t, "unshare")
	for _, host := range []string{"hgx-h100", "hgx-h100-nogdr", "hgx-h100-swapped"} {
		t.Run(host, func(t *testing.T) {
			e := start(t, hostArgs(t, host)...)
			_, body := e.get(t, "/metrics")
			fams := scrapeFamilies(t, body)
			out := lspciOnFixture(t, host, "-D", "-vvv")
			acs := lspciACSCtl(out)
			regs := fams["rdma_pci_acs_control_register"]
			if len(regs) == 0 {
				t.Fatal("no rdma_pci_acs_control_register series")
			}
			for _, s := range regs {
				addr := s.labels["pci_address"]
				got, ok := acs[addr]
				if !ok {
					t.Errorf("%s: lspci shows no ACSCtl", addr)
					continue
				}
				if want := pcicfg.Decode(uint16(s.value)); got != want {
					t.Errorf("%s: lspci ACSCtl %q, exporter %q (%v)", addr, got, want, s.value)
				}
			}
			redirect := 0
			for _, s := range fams["rdma_pci_acs_redirect_enabled"] {
				ctl := acs[s.labels["pci_address"]]
				on := strings.Contains(ctl, "ReqRedir+") || strings.Contains(ctl, "CmpltRedir+") || strings.Contains(ctl, "EgressCtrl+")
				if on != (s.value == 1) {
					t.Errorf("%s: lspci %q, redirect_enabled %v", s.labels["pci_address"], ctl, s.value)
				}
				redirect += int(s.value)
			}
			if want := map[string]int{"hgx-h100": 0, "hgx-h100-nogdr": 14, "hgx-h100-swapped": 0}[host]; redirect != want {
				t.Errorf("%d redirecting bridges, want %d", redirect, want)
			}
			sizes := lspciDevCtlSizes(out)
			addr := map[string]string{}
			for _, s := range fams["rdma_device_pci_info"] {
				addr[s.labels["device"]] = s.labels["pci_address"]
			}
			for _, m := range []struct{ name, key string }{
				{"rdma_device_pcie_max_payload_bytes", "MaxPayload"},
				{"rdma_device_pcie_max_read_request_bytes", "MaxReadReq"},
			} {
				series := fams[m.name]
				if len(series) == 0 || len(series) != len(addr) {
					t.Errorf("%d %s series for %d RDMA devices", len(series), m.name, len(addr))
				}
				for _, s := range series {
					a := addr[s.labels["device"]]
					got, ok := sizes[a][m.key]
					if !ok {
						t.Errorf("%s (%s): lspci shows no DevCtl %s", s.labels["device"], a, m.key)
						continue
					}
					if float64(got) != s.value {
						t.Errorf("%s (%s): lspci DevCtl %s %d bytes, exporter %s %v", s.labels["device"], a, m.key, got, m.name, s.value)
					}
				}
			}
		})
	}
}

// lspciOnFixture runs the real lspci with args in a private mount
// namespace whose /sys is a copy of the fixture host's. lspci insists on
// each function's irq and resource files, which the fixtures do not
// record: the copy gets empty ones, the fixture does not. Only stdout is
// read (pcilib warns on stderr about functions without config).
func lspciOnFixture(t *testing.T, host string, args ...string) string {
	t.Helper()
	sys := filepath.Join(t.TempDir(), "sys")
	hostfstest.CopyTree(t, filepath.Join(repoRoot(t), "fixtures", "hosts", host, "sys"), sys)
	devs, err := filepath.Glob(filepath.Join(sys, "bus/pci/devices/*"))
	if err != nil || len(devs) == 0 {
		t.Fatal(devs, err)
	}
	for _, d := range devs {
		for _, f := range []string{"irq", "resource"} {
			if err := os.WriteFile(filepath.Join(d, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd := exec.Command("unshare", append([]string{"-r", "-m", "sh", "-c", `mount --bind "$1" /sys && shift && exec lspci "$@"`, "sh", sys}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("lspci %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// lspciDevCtlSizes maps each function of lspci -D -vvv to the sizes of
// its DevCtl ("MaxPayload 256 bytes, MaxReadReq 4096 bytes", the block's
// only line naming both; DevCap's names only MaxPayload).
func lspciDevCtlSizes(out string) map[string]map[string]int {
	res := map[string]map[string]int{}
	cur := ""
	for _, line := range strings.Split(out, "\n") {
		if m := lspciFunc.FindStringSubmatch(line); m != nil {
			cur = m[1]
			continue
		}
		if m := lspciDevCtlSize.FindStringSubmatch(line); m != nil && cur != "" {
			mps, _ := strconv.Atoi(m[1])
			mrrs, _ := strconv.Atoi(m[2])
			res[cur] = map[string]int{"MaxPayload": mps, "MaxReadReq": mrrs}
		}
	}
	return res
}

var lspciDevCtlSize = regexp.MustCompile(`^\s+MaxPayload (\d+) bytes, MaxReadReq (\d+) bytes`)

var lspciFunc = regexp.MustCompile(`^([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) `)

// lspciACSCtl maps each function of lspci -D -vvv to its ACSCtl decode.
func lspciACSCtl(out string) map[string]string {
	res := map[string]string{}
	cur := ""
	for _, line := range strings.Split(out, "\n") {
		if m := lspciFunc.FindStringSubmatch(line); m != nil {
			cur = m[1]
			continue
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "ACSCtl:"); ok && cur != "" {
			res[cur] = strings.Join(strings.Fields(v), " ")
		}
	}
	return res
}
