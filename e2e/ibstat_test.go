// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// underFixture runs a shell command with the fixture host's sys tree bind
// mounted over /sys in a private user and mount namespace, so the real
// ibstat and ibstatus read the same files as the exporter and the host is
// untouched (see shared/research/ibstat-on-fixture.txt).
func underFixture(t *testing.T, host, script string) string {
	t.Helper()
	requireTool(t, "unshare")
	sys := filepath.Join(repoRoot(t), "fixtures", "hosts", host, "sys")
	cmd := exec.Command("unshare", "-r", "-m", "sh", "-c", `mount --bind "$1" /sys && shift && eval "$1"`, "sh", sys, script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("unshare on %s: %v\n%s", host, err, out)
	}
	return string(out)
}

// ibBlock is one "CA 'x'" or "Infiniband device 'x' port n status:" block.
type ibBlock struct {
	device string
	ports  map[int]map[string]string
	attrs  map[string]string
}

// parseIbstat parses ibstat's CA/port blocks.
func parseIbstat(out string) map[string]*ibBlock {
	cas := map[string]*ibBlock{}
	var ca *ibBlock
	port := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		trim := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "CA '"):
			name := strings.TrimSuffix(strings.TrimPrefix(line, "CA '"), "'")
			ca = &ibBlock{device: name, ports: map[int]map[string]string{}, attrs: map[string]string{}}
			cas[name] = ca
			port = 0
		case ca == nil:
		case strings.HasPrefix(trim, "Port ") && strings.HasSuffix(trim, ":"):
			port, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(trim, "Port "), ":"))
			ca.ports[port] = map[string]string{}
		default:
			k, v, ok := strings.Cut(trim, ":")
			if !ok {
				continue
			}
			if port > 0 {
				ca.ports[port][k] = strings.TrimSpace(v)
			} else {
				ca.attrs[k] = strings.TrimSpace(v)
			}
		}
	}
	return cas
}

// parseIbstatus parses ibstatus' per-port blocks into device/port -> attrs.
func parseIbstatus(out string) map[string]map[string]string {
	res := map[string]map[string]string{}
	var cur map[string]string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "Infiniband device '") {
			var dev string
			var port int
			if _, err := fmt.Sscanf(strings.ReplaceAll(line, "'", " "), "Infiniband device  %s  port %d status:", &dev, &port); err != nil {
				continue
			}
			cur = map[string]string{}
			res[fmt.Sprintf("%s/%d", dev, port)] = cur
			continue
		}
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && cur != nil {
			cur[k] = strings.TrimSpace(v)
		}
	}
	return res
}

type series struct {
	labels map[string]string
	value  float64
}

func scrapeFamilies(t *testing.T, body string) map[string][]series {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]series{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			s := series{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			s.value = value(m)
			out[name] = append(out[name], s)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	}
	return 0
}

func lookup(fams map[string][]series, name string, labels ...string) (series, bool) {
	for _, s := range fams[name] {
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if s.labels[labels[i]] != labels[i+1] {
				match = false
			}
		}
		if match {
			return s, true
		}
	}
	return series{}, false
}

// ibstat's names for port states and physical states (infiniband-diags 44).
var (
	ibstatState = map[string]float64{"Down": 1, "Initializing": 2, "Armed": 3, "Active": 4}
	ibstatPhys  = map[string]float64{"Sleep": 1, "Polling": 2, "Disabled": 3, "PortConfigurationTraining": 4,
		"LinkUp": 5, "LinkErrorRecovery": 6, "PhyTest": 7}
)

// ibstatAborts are the fixture hosts whose tree lacks a port file ibstat
// cannot do without, because no recording gives its value (bnxt_re-roce:
// rate, and bnxt_re1's state; epyc-genoa: rate and phys_state;
// cxgb4-iwarp: mlx5_0's rate and phys_state): ibstat stops there, as it
// would on a real host missing the file, so only ibstatus is compared. The
// value is the start of ibstat's message.
var ibstatAborts = map[string]string{"bnxt_re-roce": "ibpanic: ", "epyc-genoa": "ibpanic: ", "cxgb4-iwarp": "ibpanic: "}

// TestIbstatAgrees runs the real ibstat and ibstatus on every fixture host
// and checks that state, physical state, rate, link layer, firmware, GUIDs
// (node, system image and port) and LIDs agree with the exporter's metrics.
func TestIbstatAgrees(t *testing.T) {
	requireTool(t, "ibstat")
	requireTool(t, "ibstatus")
	for _, host := range hosts(t) {
		if host == "broken" {
			continue // ibstat aborts on the first missing file by design
		}
		t.Run(host, func(t *testing.T) {
			e := start(t, hostArgs(t, host)...)
			_, body := e.get(t, "/metrics")
			fams := scrapeFamilies(t, body)
			// ibstatus fails with "No devices" on a host without the
			// class directory (plain-vm); ibstat prints nothing there.
			out := underFixture(t, host, "ibstat; echo '=== ibstatus'; ibstatus || [ ! -d /sys/class/infiniband ]")
			ibstatOut, ibstatusOut, _ := strings.Cut(out, "=== ibstatus")
			cas := parseIbstat(ibstatOut)

			// ibstat lists exactly the channel adapters (node_type CA).
			want := 0
			for _, s := range fams["rdma_device_info"] {
				if s.labels["node_type"] == "CA" {
					want++
				}
			}
			if msg, ok := ibstatAborts[host]; ok {
				if !strings.Contains(ibstatOut, msg) || len(cas) != 0 {
					t.Errorf("ibstat was expected to stop on the missing files (%q), it printed\n%s", msg, ibstatOut)
				}
				want = 0
			}
			if len(cas) != want {
				t.Fatalf("ibstat shows %d CAs, exporter %d with node_type CA\n%s", len(cas), want, ibstatOut)
			}
			checked := 0
			for dev, ca := range cas {
				info, ok := lookup(fams, "rdma_device_info", "device", dev)
				if !ok {
					t.Errorf("%s: in ibstat, not in the exporter", dev)
					continue
				}
				eq := func(what, ib, exp string) {
					if ib != exp {
						t.Errorf("%s %s: ibstat %q, exporter %q", dev, what, ib, exp)
					}
				}
				eq("CA type", ca.attrs["CA type"], info.labels["hca_type"])
				eq("firmware", ca.attrs["Firmware version"], info.labels["fw_ver"])
				eq("hardware version", ca.attrs["Hardware version"], info.labels["hw_rev"])
				eq("node GUID", ca.attrs["Node GUID"], info.labels["node_guid"])
				eq("system image GUID", ca.attrs["System image GUID"], info.labels["sys_image_guid"])
				for port, attrs := range ca.ports {
					p := strconv.Itoa(port)
					num := func(metric string) float64 {
						s, ok := lookup(fams, metric, "device", dev, "port", p)
						if !ok {
							t.Errorf("%s/%s: no %s", dev, p, metric)
						}
						return s.value
					}
					if v := num("rdma_port_state"); ibstatState[attrs["State"]] != v {
						t.Errorf("%s/%s state: ibstat %q, exporter %v", dev, p, attrs["State"], v)
					}
					if v := num("rdma_port_physical_state"); ibstatPhys[attrs["Physical state"]] != v {
						t.Errorf("%s/%s physical state: ibstat %q, exporter %v", dev, p, attrs["Physical state"], v)
					}
					rate := strings.TrimSuffix(attrs["Rate"], " (FDR10)")
					if v := num("rdma_port_rate_bytes_per_second"); strconv.FormatFloat(v*8/1e9, 'f', -1, 64) != rate {
						t.Errorf("%s/%s rate: ibstat %q Gb/s, exporter %v B/s", dev, p, attrs["Rate"], v)
					}
					for metric, key := range map[string]string{"rdma_port_lid": "Base lid", "rdma_port_sm_lid": "SM lid", "rdma_port_lmc": "LMC"} {
						if v := num(metric); strconv.FormatFloat(v, 'f', -1, 64) != attrs[key] {
							t.Errorf("%s/%s %s: ibstat %q, exporter %v", dev, p, key, attrs[key], v)
						}
					}
					if v := num("rdma_port_capability_mask"); fmt.Sprintf("0x%08x", uint64(v)) != attrs["Capability mask"] {
						t.Errorf("%s/%s capability mask: ibstat %q, exporter %v", dev, p, attrs["Capability mask"], v)
					}
					pi, _ := lookup(fams, "rdma_port_info", "device", dev, "port", p)
					eq("port "+p+" link layer", attrs["Link layer"], pi.labels["link_layer"])
					// ibstat prints GID 0's low half as "Port GUID" on every
					// port; only on an InfiniBand port is it the port's GUID
					// (on RoCE it is the netdev MAC's EUI-64), and only there
					// does the exporter give it.
					wantGUID := ""
					if attrs["Link layer"] == "InfiniBand" {
						wantGUID = attrs["Port GUID"]
					}
					eq("port "+p+" GUID", wantGUID, pi.labels["port_guid"])
					checked++
				}
			}
			if want > 0 && checked == 0 {
				t.Fatal("no port compared")
			}

			// ibstatus prints the raw rate string: speed and width must match.
			st := parseIbstatus(ibstatusOut)
			for _, pi := range fams["rdma_port_info"] {
				key := pi.labels["device"] + "/" + pi.labels["port"]
				attrs, ok := st[key]
				if !ok {
					continue // ibstatus, like ibstat, skips non-CA devices
				}
				if _, ok := lookup(fams, "rdma_port_rate_bytes_per_second", "device", pi.labels["device"], "port", pi.labels["port"]); !ok {
					// no rate file (siw-softiwarp): ibstatus says so too
					if attrs["rate"] != "unknown" {
						t.Errorf("%s: exporter has no rate, ibstatus %q", key, attrs["rate"])
					}
				} else if wantRate := fmt.Sprintf("(%s %s)", pi.labels["width"], pi.labels["speed"]); !strings.HasSuffix(attrs["rate"], wantRate) && !strings.HasSuffix(attrs["rate"], "("+pi.labels["width"]+")") {
					t.Errorf("%s ibstatus rate %q, exporter width/speed %s", key, attrs["rate"], wantRate)
				}
				if attrs["link_layer"] != pi.labels["link_layer"] {
					t.Errorf("%s ibstatus link_layer %q, exporter %q", key, attrs["link_layer"], pi.labels["link_layer"])
				}
			}
		})
	}
}
