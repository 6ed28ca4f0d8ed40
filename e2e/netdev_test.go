// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const netdevChildEnv = "RDMA_DOCTOR_E2E_NETDEV_CHILD"

// TestNetdevLive runs the binary the way it runs on a host: --path.sysfs is
// /sys, taken as the live kernel's (--host.live=true: the fixture bound
// there is no sysfs mount, which auto would see), so the netdev collector
// takes the rdmamap path, and the
// ethtool ioctl reaches real kernel netdevs. It does so in a private user,
// mount and network namespace: a copy of the roce-cx6dx fixture is bind
// mounted over /sys, and a veth pair named like that host's two RoCE
// netdevs (enp59s0f0np0, enp59s0f1np1) stands in for the ConnectX-6 Dx
// ports, with the copy's ifindex files set to the veths' real ones.
//
// Covered: rdmamap's char-device and PCI lookups inside the binary, the
// live/fixture switch, the ifindex identity check, ethtool driver info,
// speed and a selected statistic end to end. Not covered: anything
// mlx5-specific from ethtool (a veth has no such statistics or firmware).
func TestNetdevLive(t *testing.T) {
	if os.Getenv(netdevChildEnv) != "" {
		netdevLiveChild(t)
		return
	}
	requireTool(t, "unshare")
	requireTool(t, "ip")
	requireTool(t, "cp")
	bin := binary(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "host")
	cp := exec.Command("cp", "-a", filepath.Join(repoRoot(t), "fixtures", "hosts", "roce-cx6dx"), root)
	if out, err := cp.CombinedOutput(); err != nil {
		t.Fatalf("copy fixture: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "-r", "-m", "-n", os.Args[0], "-test.run=^TestNetdevLive$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), netdevChildEnv+"=1", "RDMA_DOCTOR_BIN="+bin, "RDMA_DOCTOR_ROOT="+root, "RDMA_DOCTOR_OUT="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestNetdevLive") {
		t.Fatalf("namespaced run: %v\n%s", err, out)
	}
	body, err := os.ReadFile(filepath.Join(dir, "metrics"))
	if err != nil {
		t.Fatal(err)
	}
	peer, _ := os.ReadFile(filepath.Join(dir, "peer_ifindex"))
	live := scrapeFamilies(t, string(body))
	t.Logf("live: %q", append(seriesSet(live["rdma_netdev_ethtool_info"]), seriesSet(live["rdma_device_char_device_info"])...))

	// ethtool reached the veths: driver, speed, the selected statistic.
	for _, nd := range []string{"enp59s0f0np0", "enp59s0f1np1"} {
		if s, ok := lookup(live, "rdma_netdev_ethtool_info", "netdev", nd); !ok || s.labels["driver"] != "veth" {
			t.Errorf("%s: ethtool info %v (%v)", nd, s.labels, ok)
		}
		if s, ok := lookup(live, "rdma_netdev_speed_bytes_per_second", "netdev", nd); !ok || s.value != 1.25e9 {
			t.Errorf("%s: speed %v (%v), want veth's 10 Gb/s", nd, s.value, ok)
		}
		// ethtool netlink: the link state of an up veth pair, and
		// neither an extended state nor FEC counters (veth has neither).
		if s, ok := lookup(live, "rdma_netdev_link_detected", "netdev", nd); !ok || s.value != 1 {
			t.Errorf("%s: link detected %v (%v), want 1", nd, s.value, ok)
		}
	}
	// The module EEPROM request reached the kernel (root in the test's
	// user namespace passes its CAP_NET_ADMIN check) and veth has no
	// module: the reason, and no module series.
	for _, nd := range []string{"enp59s0f0np0", "enp59s0f1np1"} {
		if s, ok := lookup(live, "rdma_netdev_module_eeprom_readable", "netdev", nd); !ok || s.value != 0 || s.labels["reason"] != "unsupported" {
			t.Errorf("%s: module eeprom readable %v %v (%v), want 0 unsupported", nd, s.value, s.labels, ok)
		}
	}
	for _, name := range []string{"rdma_netdev_link_ext_state", "rdma_netdev_fec_corrected_blocks_total", "rdma_netdev_fec_uncorrectable_blocks_total",
		"rdma_netdev_module_info", "rdma_netdev_module_temperature_celsius", "rdma_netdev_module_rx_power_watts"} {
		if n := len(live[name]); n != 0 {
			t.Errorf("%s: %d series on veths, want none", name, n)
		}
	}
	// The roce collector asked the kernel's DCB netlink (RTM_GETDCB,
	// DCB_CMD_IEEE_GET) and ETHTOOL_GPAUSEPARAM for both veths: veth has
	// neither, so the outcome counts say unsupported, the live-only
	// series are absent and the collector did not fail.
	for _, q := range []string{"dcb", "pause"} {
		if s, ok := lookup(live, "rdma_roce_kernel_requests", "query", q, "status", "unsupported"); !ok || s.value != 2 {
			t.Errorf("roce %s requests unsupported: %v (%v), want 2; all: %q", q, s.value, ok, seriesSet(live["rdma_roce_kernel_requests"]))
		}
	}
	if n := len(live["rdma_roce_kernel_requests"]); n != 2 {
		t.Errorf("roce kernel request outcomes: %q, want only the two unsupported", seriesSet(live["rdma_roce_kernel_requests"]))
	}
	for _, name := range []string{"rdma_roce_pfc_enabled", "rdma_roce_pfc_frames_total", "rdma_roce_trust_dscp",
		"rdma_roce_priority_traffic_class", "rdma_roce_global_pause_enabled"} {
		if n := len(live[name]); n != 0 {
			t.Errorf("%s: %d series on veths, want none", name, n)
		}
	}
	if s, ok := lookup(live, "rdma_scrape_collector_success", "collector", "roce"); !ok || s.value != 1 {
		t.Errorf("roce collector success %v (%v), want 1", s.value, ok)
	}
	if s, ok := lookup(live, "rdma_netdev_ethtool_stat_total", "netdev", "enp59s0f0np0", "stat", "peer_ifindex"); !ok || strconv.FormatFloat(s.value, 'f', -1, 64) != strings.TrimSpace(string(peer)) {
		t.Errorf("peer_ifindex %v (%v), want %s", s.value, ok, peer)
	}

	// The same tree read the fixture way (no rdmamap, no ethtool match)
	// maps the same netdevs and char devices.
	e := start(t, "--path.rootfs="+root)
	_, fbody := e.get(t, "/metrics")
	fixture := scrapeFamilies(t, fbody)
	for _, name := range []string{"rdma_device_char_device_info", "rdma_netdev_info", "rdma_netdev_roce_gids", "rdma_port_info"} {
		a, b := seriesSet(live[name]), seriesSet(fixture[name])
		if len(a) == 0 || !slices.Equal(a, b) {
			t.Errorf("%s differs:\nlive    %q\nfixture %q", name, a, b)
		}
	}
	if n := len(fixture["rdma_netdev_ethtool_info"]); n != 0 {
		t.Errorf("fixture run queried ethtool for %d netdevs the kernel here does not have", n)
	}
}

func seriesSet(ss []series) []string {
	var out []string
	for _, s := range ss {
		var kv []string
		for k, v := range s.labels {
			kv = append(kv, k+"="+v)
		}
		slices.Sort(kv)
		out = append(out, fmt.Sprintf("%s %v", strings.Join(kv, ","), s.value))
	}
	slices.Sort(out)
	return out
}

// netdevLiveChild runs inside the namespaces: it makes the veths, points
// the copied tree's ifindex files at them, bind mounts the tree's sys over
// /sys, runs the binary and saves one scrape.
func netdevLiveChild(t *testing.T) {
	root, out := os.Getenv("RDMA_DOCTOR_ROOT"), os.Getenv("RDMA_DOCTOR_OUT")
	ip := func(args ...string) {
		t.Helper()
		if b, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, b)
		}
	}
	ip("link", "set", "lo", "up")
	ip("link", "add", "enp59s0f0np0", "type", "veth", "peer", "name", "enp59s0f1np1")
	ip("link", "set", "enp59s0f0np0", "up")
	ip("link", "set", "enp59s0f1np1", "up")
	for _, nd := range []string{"enp59s0f0np0", "enp59s0f1np1"} {
		ifi, err := net.InterfaceByName(nd)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "sys/class/net", nd, "ifindex"), []byte(strconv.Itoa(ifi.Index)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if nd == "enp59s0f1np1" {
			if err := os.WriteFile(filepath.Join(out, "peer_ifindex"), []byte(strconv.Itoa(ifi.Index)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := syscall.Mount(filepath.Join(root, "sys"), "/sys", "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind over /sys: %v", err)
	}
	addr := freeAddr(t)
	cmd := exec.Command(os.Getenv("RDMA_DOCTOR_BIN"), "--web.listen-address="+addr, "--path.procfs="+filepath.Join(root, "proc"),
		"--collector.netdev.ethtool-stats=peer_ifindex", "--collector.netdev.module-eeprom", "--log.level=debug", "--host.live=true")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	e := &exporter{addr: addr, cmd: cmd, stderr: &stderr}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rdma_doctor did not listen\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, body := e.get(t, "/metrics")
	if code != 200 {
		t.Fatalf("HTTP %d\n%s", code, body)
	}
	if err := os.WriteFile(filepath.Join(out, "metrics"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "mapping through rdmamap") {
		t.Errorf("the binary did not take the rdmamap path:\n%s", stderr.String())
	}
}
