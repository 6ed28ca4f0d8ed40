// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
)

// healthy are fixture hosts without a designed fault: nothing may fail.
var healthy = []string{"roce-cx6dx", "mlx4-qdr", "iwarp-i40iw", "opa-hfi1", "ipoib-enhanced", "numa-remote", "sm-opensm",
	"efa-aws", "irdma-e810", "siw-softiwarp", "bnxt_re-roce", "roce-ecn-ofed"}

// TestFixtureHosts: every fixture host evaluates without a crashed check,
// the healthy ones without a failure, and every known fault is found with
// the right target and severity.
func TestFixtureHosts(t *testing.T) {
	reports := map[string]*diagnose.Report{}
	for _, host := range diagnosetest.FixtureHosts(t) {
		r := evaluateHost(t, filepath.Join(diagnosetest.Fixtures, host), nil)
		reports[host] = r
		for _, f := range r.Findings {
			if strings.Contains(f.Evidence, "panic") {
				t.Errorf("%s: check %s panicked: %s", host, f.Check, f.Evidence)
			}
			if (f.Severity == diagnose.Warn || f.Severity == diagnose.Fail) && f.Remedy == "" {
				t.Errorf("%s: %s %s is %s without a remedy", host, f.Check, f.Target, f.Severity)
			}
			if f.Severity == diagnose.Skip && f.Evidence == "" {
				t.Errorf("%s: %s %s skipped without a reason", host, f.Check, f.Target)
			}
		}
		if len(r.Checks) != len(All()) {
			t.Errorf("%s: %d checks evaluated, %d registered", host, len(r.Checks), len(All()))
		}
	}
	for _, c := range []string{"cx6-hdr-fdr", "dgx-h100", "broken"} {
		if reports[c] == nil {
			t.Errorf("fixture host %s missing", c)
		}
	}
	for _, host := range healthy {
		r, ok := reports[host]
		if !ok {
			t.Logf("fixture host %s not present: its expectations are not checked", host)
			continue
		}
		for _, f := range r.Findings {
			if f.Severity == diagnose.Fail {
				t.Errorf("healthy host %s fails %s %s: %s / %s", host, f.Check, f.Target, f.Observed, f.Evidence)
			}
		}
	}

	type want struct {
		host, check, target string
		sev                 diagnose.Severity
		contains            []string // in observed, evidence or remedy
	}
	for _, w := range []want{
		// The guide's case: a switch port set to FDR, and an HDR100 (2X) link,
		// against the expected 200 Gb/s of the host's config.
		{"cx6-hdr-fdr", "port.rate", "mlx5_0/1", diagnose.Fail, []string{"56 Gb/sec (4X FDR)", "switch-port speed setting", "cable"}},
		{"cx6-hdr-fdr", "port.rate", "mlx5_1/1", diagnose.Fail, []string{"100 Gb/sec (2X HDR)", "switch-port speed", "cable"}},
		{"cx6-hdr-fdr", "port.phys", "mlx5_0/1", diagnose.Pass, nil},
		// Saturated counters are unknown, never clean.
		{"dgx-h100", "ctr.downed", "mlx5_1/1", diagnose.Warn, []string{"saturated at 255"}},
		{"dgx-h100", "ctr.downed", "mlx5_5/1", diagnose.Warn, []string{"saturated at 255"}},
		{"dgx-h100", "ctr.discards", "mlx5_5/1", diagnose.Warn, []string{"port_xmit_discards is saturated at 65535"}},
		{"dgx-h100", "ctr.xmit_wait", "mlx5_5/1", diagnose.Warn, []string{"saturated at 4294967295"}},
		{"dgx-h100", "ctr.downed", "mlx5_0/1", diagnose.Skip, []string{diagnose.NeedTwoSamples}},
		// 15 in a 4-bit field on every port: cannot be judged, not "clear it"
		{"dgx-h100", "ctr.integrity", "mlx5_bond_0/1", diagnose.Skip, []string{"excessive_buffer_overrun_errors reads 15, its maximum"}},
		{"dgx-h100", "port.rate", "mlx5_0/1", diagnose.Pass, []string{"400 Gb/sec (4X NDR)"}},
		{"dgx-h100", "port.rate", "mlx5_bond_0/1", diagnose.Pass, []string{"200 Gb/sec (2X NDR)"}},
		{"dgx-h100", "fw.uniform", "mlx5_9", diagnose.Pass, []string{"28.41.1000"}},
		{"dgx-h100", "sm.present", "mlx5_0/1", diagnose.Pass, []string{"SM LID 334"}},
		// The broken host: unreadable values skip with their error.
		{"broken", "port.state", "mlx5_1/1", diagnose.Skip, []string{"ports/1/state"}},
		{"broken", "port.rate", "mlx5_1/1", diagnose.Skip, []string{"fast"}},
		{"broken", "fw.version", "mlx5_1", diagnose.Skip, []string{"fw_ver", "empty"}},
		{"broken", "dev.present", "mlx5_4", diagnose.Warn, []string{"unreadable"}},
		{"broken", "dev.present", "mlx5_0", diagnose.Pass, nil},
		{"broken", "port.phys", "mlx5_0/1", diagnose.Pass, nil},
		// bnxt_re-roce: the port whose state no recording gives is
		// skipped with the missing file, never judged down
		{"bnxt_re-roce", "port.state", "bnxt_re1/1", diagnose.Skip, []string{"ports/1/state"}},
		{"bnxt_re-roce", "port.state", "bnxt_re0/1", diagnose.Pass, nil},
		{"bnxt_re-roce", "roce.gid_v2", "bnxt_re0/1", diagnose.Pass, nil},
		// cxgb4-iwarp: a Chelsio T6 is iWARP (node type RNIC), not RoCE:
		// the RoCE checks skip its ports with the reason, and its down
		// ports get Ethernet remedies without NVIDIA's tools
		{"cxgb4-iwarp", "roce.gid_v2", "cxgb4_0/1", diagnose.Skip, []string{"4: RNIC", "iWARP"}},
		{"cxgb4-iwarp", "roce.gid_v2", "cxgb4_0/2", diagnose.Skip, []string{"4: RNIC", "iWARP"}},
		{"cxgb4-iwarp", "roce.lossless", "cxgb4_0/1", diagnose.Skip, []string{"iWARP"}},
		{"cxgb4-iwarp", "port.phys", "cxgb4_0/1", diagnose.Fail, []string{"ethtool -m enp175s0f4"}},
		// roce-ecn-ofed: the MLNX_OFED ECN tree judged on the priority of
		// the recorded default RoCE ToS 160 (DSCP 40: priority 5)
		{"roce-ecn-ofed", "roce.lossless", "mlx5_0/1", diagnose.Pass, []string{"priority 5", "ECN roce_np on", "ECN roce_rp on"}},
		// Placement: IRQs pinned to the remote node, all on one CPU.
		{"numa-remote", "irq.local", "mlx5_0", diagnose.Warn, []string{"16 of 16", "irq-affinity"}},
		{"numa-remote", "irq.spread", "mlx5_1", diagnose.Warn, []string{"on 1 CPU(s)"}},
		{"numa-remote", "irq.spread", "mlx5_0", diagnose.Pass, nil},
		{"numa-remote", "pci.link", "mlx5_1", diagnose.Warn, []string{"16 GT/s x16", "32 GT/s x16"}},
		{"numa-remote", "irq.balance", "host", diagnose.Warn, []string{"irqbalance running"}},
		// iWARP has no subnet manager, even where the kernel says InfiniBand.
		{"iwarp-i40iw", "sm.present", "host", diagnose.Skip, []string{"no InfiniBand ports"}},
		{"iwarp-i40iw", "pci.numa", "i40iw0", diagnose.Pass, []string{"numa_node -1"}},
		{"mlx4-qdr", "ctr.xmit_wait", "mlx4_0/1", diagnose.Warn, []string{"saturated"}},
		// Tuning: a job launcher without unlimited memlock, governors.
		{"dgx-h100", "mem.memlock", "slurmstepd", diagnose.Fail, []string{"soft 64.0 KiB", "LimitMEMLOCK=infinity"}},
		{"dgx-h100", "mem.memlock", "slurmd", diagnose.Pass, []string{"unlimited"}},
		{"cx6-hdr-fdr", "mem.memlock", "slurmd", diagnose.Fail, nil},
		// rdma cgroup policy of dgx-h100: /slurm must cap contexts at 64.
		{"dgx-h100", "cgroup.rdma", "/slurm mlx5_0", diagnose.Warn, []string{"hca_handle=max hca_object=max", "hca_handle=64 hca_object=max", "line ", "mlx5_0 hca_handle=64 hca_object=max"}},
		{"dgx-h100", "cgroup.rdma", "/slurm/job_4242 mlx5_bond_0", diagnose.Pass, []string{"hca_handle=max hca_object=max"}},
		{"numa-remote", "cgroup.rdma", "host", diagnose.Skip, []string{"diagnose.policies.rdma_cgroup_limits"}},
		{"numa-remote", "cpu.governor", "host", diagnose.Warn, []string{"powersave", "cpu-governor"}},
		{"mlx4-qdr", "cpu.governor", "host", diagnose.Warn, []string{"ondemand"}},
		{"dgx-h100", "cpu.governor", "host", diagnose.Pass, []string{"224 × performance"}},
		{"iwarp-i40iw", "cpu.governor", "host", diagnose.Skip, []string{"no CPU has cpufreq"}},
		{"dgx-h100", "sysctl.net", "net.core.rmem_max", diagnose.Warn, []string{"212992", "4194304"}},
		{"roce-cx6dx", "sysctl.net", "host", diagnose.Skip, []string{"no IPoIB netdev"}},
		{"roce-cx6dx", "drv.kernel", "host", diagnose.Pass, []string{"5.14.0"}},
		// IPoIB and RoCE netdevs: enhanced IPoIB in datagram mode with MTU
		// 4092 passes; legacy connected 65520 passes.
		{"ipoib-enhanced", "ipoib.mode", "ib0", diagnose.Pass, []string{"enhanced IPoIB"}},
		{"ipoib-enhanced", "ipoib.mtu", "ib0", diagnose.Pass, []string{"datagram mode, MTU 4092"}},
		{"mlx4-qdr", "ipoib.mode", "ib1", diagnose.Pass, []string{"connected"}},
		{"mlx4-qdr", "ipoib.mtu", "ib1", diagnose.Pass, []string{"MTU 65520"}},
		{"mlx4-qdr", "ipoib.mtu", "ib0", diagnose.Pass, []string{"MTU 2044"}},
		{"roce-cx6dx", "roce.gid_v2", "mlx5_0/1", diagnose.Pass, []string{"2 RoCE v2 GID(s)"}},
		{"dgx-h100", "roce.gid_v2", "mlx5_bond_0/1", diagnose.Pass, []string{"bond0"}},
		{"dgx-h100", "port.netdev", "ibp26s0", diagnose.Pass, []string{"operstate up"}},
		{"iwarp-i40iw", "dev.driver", "rdma_ucm", diagnose.Warn, []string{"modprobe rdma_ucm"}},
		// Subnet manager hosts.
		{"sm-no-sm", "sm.present", "mlx5_0/1", diagnose.Fail, []string{"SM LID 0", "opensm"}},
		{"sm-no-sm", "port.state", "mlx5_0/1", diagnose.Warn, []string{"no subnet manager"}},
		{"sm-opensm", "sm.local", "opensm 0x946dae0300cdf100", diagnose.Pass, []string{"priority 14", "bound to 0x946dae0300cdf100"}},
		{"roce-cx6dx", "sm.present", "host", diagnose.Skip, []string{"RoCE"}},
		// epyc-genoa, as its recording has it (the GPU checks are in
		// placement's gpu_test.go): every CX-7 port PORT_DOWN, two firmware versions
		// on two cards, link files recorded for the first function of each
		// card only, RoCE, no config space recorded.
		{"epyc-genoa", "port.state", "mlx5_0/1", diagnose.Fail, []string{"1: DOWN"}},
		{"epyc-genoa", "port.state", "mlx5_3/1", diagnose.Fail, []string{"1: DOWN"}},
		{"epyc-genoa", "port.phys", "mlx5_0/1", diagnose.Skip, []string{"phys_state"}},
		{"epyc-genoa", "fw.uniform", "mlx5_0", diagnose.Warn, []string{"28.41.1000", "28.43.2566 on mlx5_2, mlx5_3"}},
		{"epyc-genoa", "fw.uniform", "mlx5_2", diagnose.Pass, []string{"28.43.2566"}},
		{"epyc-genoa", "pci.link", "mlx5_0", diagnose.Pass, []string{"32 GT/s x16", "0000:21:00.0"}},
		{"epyc-genoa", "pci.link", "mlx5_1", diagnose.Skip, []string{"link files are absent"}},
		{"epyc-genoa", "pci.numa", "mlx5_0", diagnose.Pass, []string{"numa_node 0", "0-31"}},
		{"epyc-genoa", "pci.numa", "mlx5_2", diagnose.Pass, []string{"numa_node 1", "32-63"}},
		{"epyc-genoa", "pci.payload", "mlx5_0", diagnose.Skip, []string{"0000:21:00.0/config"}},
		{"epyc-genoa", "sm.present", "host", diagnose.Skip, []string{"no InfiniBand ports"}},
		{"epyc-genoa", "drv.kernel", "host", diagnose.Pass, []string{"6.8.0-64-generic"}},
		{"epyc-genoa", "irq.local", "mlx5_2", diagnose.Pass, []string{"all 8 completion IRQs local"}},
	} {
		r := reports[w.host]
		if r == nil {
			continue // logged above, or an error for the three core hosts
		}
		f, ok := diagnosetest.ReportFinding(r, w.check, w.target)
		if !ok {
			t.Errorf("%s: no %s finding for %s", w.host, w.check, w.target)
			continue
		}
		if f.Severity != w.sev {
			t.Errorf("%s: %s %s is %s, want %s: %+v", w.host, w.check, w.target, f.Severity, w.sev, f)
		}
		all := f.Observed + " | " + f.Expected + " | " + f.Evidence + " | " + f.Remedy + " | " + f.Action
		for _, c := range w.contains {
			if !strings.Contains(all, c) {
				t.Errorf("%s: %s %s lacks %q: %s", w.host, w.check, w.target, c, all)
			}
		}
	}
}

// TestNoUmadOnRoCE: ib_umad is only expected where MADs run (InfiniBand).
func TestNoUmadOnRoCE(t *testing.T) {
	r := evaluateHost(t, filepath.Join(diagnosetest.Fixtures, "roce-cx6dx"), nil)
	if f, ok := diagnosetest.ReportFinding(r, "dev.driver", "ib_umad"); ok {
		t.Errorf("ib_umad judged on a RoCE-only host: %+v", f)
	}
	if f, ok := diagnosetest.ReportFinding(r, "dev.driver", "rdma_ucm"); !ok || f.Severity != diagnose.Pass {
		t.Errorf("rdma_ucm on roce-cx6dx: %+v", f)
	}
}

// TestDeltaOnCopiedFixture changes counter files between two samples of a
// copied fixture host, as a marginal cable would, and checks the delta
// checks judge the increases (and only them: the large old values of the
// fixture are history, not faults).
func TestDeltaOnCopiedFixture(t *testing.T) {
	root := diagnosetest.CopyTree(t, filepath.Join(diagnosetest.Fixtures, "cx6-hdr-fdr"))
	bump := func(dev, rel string, by uint64) {
		diagnosetest.SetCounter(t, root, dev, rel, diagnosetest.ReadCounter(t, root, dev, rel)+by)
	}
	r := evaluateHost(t, root, func() {
		bump("mlx5_0", "ports/1/counters/symbol_error", 57)
		bump("mlx5_0", "ports/1/counters/link_downed", 1)
		bump("mlx5_0", "ports/1/counters/port_rcv_data", 25e7)
		bump("mlx5_0", "ports/1/hw_counters/out_of_sequence", 8)
		bump("mlx5_1", "ports/1/counters/port_xmit_wait", 500) // under the 1000 limit
	})
	for _, w := range []struct {
		check, target string
		sev           diagnose.Severity
		contains      string
	}{
		{"ctr.symbol", "mlx5_0/1", diagnose.Fail, "symbol_error +57 in the last 10m0s on mlx5_0/1 (4127 → 4184)"},
		{"ctr.symbol", "mlx5_1/1", diagnose.Pass, "no increase in the last 10m0s over 2 samples"},
		{"ctr.downed", "mlx5_0/1", diagnose.Fail, "link_downed +1 in the last 10m0s on mlx5_0/1 (3 → 4)"},
		{"ctr.recovery", "mlx5_0/1", diagnose.Pass, "no increase"},
		{"ctr.xmit_wait", "mlx5_1/1", diagnose.Pass, "port_xmit_wait +500"},
		{"hw.retrans", "mlx5_0/1", diagnose.Warn, "out_of_sequence +8"},
		{"port.traffic", "mlx5_0/1", diagnose.Pass, "953.7 MiB received in 10m0s"},
		{"port.traffic", "mlx5_1/1", diagnose.Pass, "idle"},
	} {
		f, ok := diagnosetest.ReportFinding(r, w.check, w.target)
		if !ok {
			t.Errorf("no %s finding for %s", w.check, w.target)
			continue
		}
		all := f.Observed + " | " + f.Evidence
		if f.Severity != w.sev || !strings.Contains(all, w.contains) {
			t.Errorf("%s %s: %s %q, want %s containing %q", w.check, w.target, f.Severity, all, w.sev, w.contains)
		}
	}
	if r.Samples != 2 || r.WindowSeconds != 600 {
		t.Errorf("samples %d window %v", r.Samples, r.WindowSeconds)
	}
}

// The driver unloaded on a copy of cx6-hdr-fdr: the class is empty (the
// RDMA core stays), both ConnectX-6 functions are on the bus, one with
// mlx5_core still bound and one with nothing; dev.present names both and
// what to load. Without the card on the bus it says so instead.
func TestDevPresentDriverUnloaded(t *testing.T) {
	root := diagnosetest.CopyTree(t, filepath.Join(diagnosetest.Fixtures, "cx6-hdr-fdr"))
	class := filepath.Join(root, "sys/class/infiniband")
	ents, err := os.ReadDir(class)
	if err != nil || len(ents) != 2 {
		t.Fatalf("class: %v %v", ents, err)
	}
	for _, e := range ents {
		if err := os.Remove(filepath.Join(class, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	fn := filepath.Join(root, "sys/bus/pci/devices/0000:3b:00.0")
	if err := os.Symlink("../../../bus/pci/drivers/mlx5_core", filepath.Join(fn, "driver")); err != nil {
		t.Fatal(err)
	}
	r := evaluateHost(t, root, nil)
	f, ok := diagnosetest.ReportFinding(r, "dev.present", "host")
	if !ok || f.Severity != diagnose.Fail ||
		!strings.Contains(f.Observed, "0000:3b:00.0 (15b3:101b, driver mlx5_core), 0000:3b:00.1 (15b3:101b, no driver)") ||
		!strings.Contains(f.Remedy, "modprobe mlx5_ib") || !strings.Contains(f.Remedy, "modprobe mlx5_core") {
		t.Errorf("dev.present: %+v", f)
	}

	if err := os.RemoveAll(filepath.Join(root, "sys/bus/pci/devices")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "sys/bus/pci/devices"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Nothing RDMA-capable left on the bus: the host looks like a plain
	// server, which is not judged (issue 36), unless the config says
	// devices must be there.
	f, _ = diagnosetest.ReportFinding(evaluateHost(t, root, nil), "dev.present", "host")
	if f.Severity != diagnose.Skip || !strings.Contains(f.Evidence, "no RDMA-capable function of any vendor on the PCI bus") {
		t.Errorf("no card on the bus: %+v", f)
	}
	cfg := filepath.Join(root, "etc/rdma_doctor/rdma_doctor.yml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, append(b, "diagnose:\n  expected_devices: 2\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	f, _ = diagnosetest.ReportFinding(evaluateHost(t, root, nil), "dev.present", "host")
	if f.Severity != diagnose.Fail || !strings.Contains(f.Observed, "no RDMA-capable function of any vendor on the PCI bus") ||
		!strings.Contains(f.Remedy, "passed through") {
		t.Errorf("no card on the bus, 2 expected: %+v", f)
	}
}

// plain-vm is a server without RDMA hardware (a virtio-net NIC, recorded):
// dev.present skips with the reason, no check fails or warns, and the same
// tree with one RDMA-capable function that has no RDMA device (an EFA
// without its driver, ids of efa-aws) fails: driver not loaded.
func TestDevPresentPlainHost(t *testing.T) {
	r := evaluateHost(t, filepath.Join(diagnosetest.Fixtures, "plain-vm"), nil)
	f, ok := diagnosetest.ReportFinding(r, "dev.present", "host")
	if !ok || f.Severity != diagnose.Skip || f.Remedy != "" ||
		!strings.Contains(f.Evidence, "no RDMA-capable function of any vendor on the PCI bus (network functions: 0000:00:03.0 (1af4:1041, driver virtio-pci))") {
		t.Errorf("dev.present on a plain host: %+v", f)
	}
	for _, f := range r.Findings {
		if f.Severity == diagnose.Fail || f.Severity == diagnose.Warn {
			t.Errorf("a plain host has a %s finding: %+v", f.Severity, f)
		}
	}
	if r.Status == diagnose.Fail || r.Status == diagnose.Warn {
		t.Errorf("plain host status %s", r.Status)
	}

	root := diagnosetest.CopyTree(t, filepath.Join(diagnosetest.Fixtures, "plain-vm"))
	dir := filepath.Join(root, "sys/devices/pci0000:00/0000:00:07.0")
	for name, v := range map[string]string{"vendor": "0x1d0f", "device": "0xefa0", "class": "0x020000"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../../../devices/pci0000:00/0000:00:07.0", filepath.Join(root, "sys/bus/pci/devices/0000:00:07.0")); err != nil {
		t.Fatal(err)
	}
	f, _ = diagnosetest.ReportFinding(evaluateHost(t, root, nil), "dev.present", "host")
	if f.Severity != diagnose.Fail || !strings.Contains(f.Observed, "0000:00:07.0 (1d0f:efa0, no driver)") || !strings.Contains(f.Remedy, "efa") {
		t.Errorf("EFA without its driver: %+v", f)
	}
}

// sm.local reads the end of the running opensm's log (a real opensm 3.3.23
// log on a copy of sm-opensm): a master that logged SUBNET UP passes; one
// whose log stops before SUBNET UP, long ago, warns that its sweep hangs.
func TestSMLocalOpenSMLog(t *testing.T) {
	root := diagnosetest.CopyTree(t, filepath.Join(diagnosetest.Fixtures, "sm-opensm"))
	b, err := os.ReadFile("../../fixtures/tools/opensm-master-ibsim.log")
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(root, "var/log/opensm.log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, ok := diagnosetest.ReportFinding(evaluateHost(t, root, nil), "sm.local", "opensm 0x946dae0300cdf100")
	if !ok || f.Severity != diagnose.Pass || !strings.Contains(f.Observed, "log: MASTER since 2025-11-30 16:39:11, last SUBNET UP 2025-11-30 16:39:11") ||
		!strings.Contains(f.Evidence, "/var/log/opensm.log") {
		t.Errorf("with SUBNET UP: %+v", f)
	}

	before, _, ok := strings.Cut(string(b), "SUBNET UP")
	if !ok {
		t.Fatal("the recording has no SUBNET UP")
	}
	before = before[:strings.LastIndexByte(before, '\n')+1]
	stuck := before + "Nov 30 16:40:11 535506 [918256C0] 0x01 -> log_send_error: ERR 5411: DR SMP Send completed with error (IB_TIMEOUT) -- dropping\n"
	if err := os.WriteFile(logPath, []byte(stuck), 0o644); err != nil {
		t.Fatal(err)
	}
	f, _ = diagnosetest.ReportFinding(evaluateHost(t, root, nil), "sm.local", "opensm 0x946dae0300cdf100")
	if f.Severity != diagnose.Warn || !strings.Contains(f.Observed, "no SUBNET UP in the log (its last 1024 KiB when first read") || !strings.Contains(f.Observed, "1 ERR line(s), last at 2025-11-30 16:40:11: log_send_error: ERR 5411") ||
		!strings.Contains(f.Remedy, "has logged no SUBNET UP since") {
		t.Errorf("stuck sweep: %+v", f)
	}
}
