// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	rdmahost "github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
)

func TestPortHasSMFromInfinibandCollector(t *testing.T) {
	tests := []struct{ host, want string }{
		{"sm-opensm", `rdma_sm_port_has_sm{device="mlx5_0",port="1"} 1`},
		{"sm-no-sm", `rdma_sm_port_has_sm{device="mlx5_0",port="1"} 0`},
		{"roce-cx6dx", ""}, // RoCE: no SM, no series
		// iWARP: no SM, even where the kernel prints link_layer InfiniBand
		{"iwarp-i40iw", ""},
		{"cxgb4-iwarp", ""},
	}
	for _, tt := range tests {
		var want string
		if tt.want != "" {
			want = "# HELP rdma_sm_port_has_sm 1 when a subnet manager has swept this InfiniBand port, 0 when its link is up but it knows no SM.\n" +
				"# TYPE rdma_sm_port_has_sm gauge\n" + tt.want + "\n"
		}
		if err := testutil.GatherAndCompare(gatherHost(t, tt.host, &config.Config{}), strings.NewReader(want), "rdma_sm_port_has_sm"); err != nil {
			t.Errorf("%s: %v", tt.host, err)
		}
	}
}

func TestSMLocalOpenSM(t *testing.T) {
	env := hostEnv(t, "../fixtures/hosts/sm-opensm", sminfo("/nonexistent"))
	c := on(env, NewSMCollector())
	want := `
# HELP rdma_sm_opensm_config_info The opensm.conf read, with its guid, subnet_prefix and routing_engine (never a *_key); always 1.
# TYPE rdma_sm_opensm_config_info gauge
rdma_sm_opensm_config_info{guid="0x946dae0300cdf100",path="/etc/rdma/opensm.conf",routing_engine="updn",subnet_prefix="0xfe80000000000000"} 1
# HELP rdma_sm_opensm_config_sm_priority sm_priority in opensm.conf (0-15; highest wins, a tie goes to the lower GUID).
# TYPE rdma_sm_opensm_config_sm_priority gauge
rdma_sm_opensm_config_sm_priority{path="/etc/rdma/opensm.conf"} 14
# HELP rdma_sm_opensm_config_sweep_interval_seconds sweep_interval in opensm.conf (0 disables sweeping).
# TYPE rdma_sm_opensm_config_sweep_interval_seconds gauge
rdma_sm_opensm_config_sweep_interval_seconds{path="/etc/rdma/opensm.conf"} 15
# HELP rdma_sm_opensm_process_info A running opensm and the options on its command line (-g, -p, -F); always 1.
# TYPE rdma_sm_opensm_process_info gauge
rdma_sm_opensm_process_info{config_file="/etc/rdma/opensm.conf",guid="0x946dae0300cdf100",priority="14"} 1
# HELP rdma_sm_opensm_running 1 when an opensm process runs on this host (comm "opensm" under --path.procfs).
# TYPE rdma_sm_opensm_running gauge
rdma_sm_opensm_running 1
# HELP rdma_sm_opensm_defaults_info The init scripts' variables (/etc/sysconfig/opensm GUIDS and PRIORITY, /etc/default/opensm PORTS); always 1.
# TYPE rdma_sm_opensm_defaults_info gauge
rdma_sm_opensm_defaults_info{guids="0x946dae0300cdf100",path="/etc/sysconfig/opensm",ports="",priority="14"} 1
`
	if err := testutil.GatherAndCompare(gatherOne(t, "sm", c), strings.NewReader(want),
		"rdma_sm_opensm_config_info", "rdma_sm_opensm_config_sm_priority", "rdma_sm_opensm_config_sweep_interval_seconds",
		"rdma_sm_opensm_process_info", "rdma_sm_opensm_running", "rdma_sm_opensm_defaults_info"); err != nil {
		t.Error(err)
	}
	// The fixture has no /dev/infiniband/umad0 (sysfs may list umad devices):
	// sminfo never runs (each gather runs a round: no loop runs), no
	// series.
	if n, _ := testutil.GatherAndCount(gatherOne(t, "sm", c), "rdma_sm_sminfo_success"); n != 0 {
		t.Errorf("%d sminfo series on a host without umad", n)
	}
}

// copyHost copies a fixture host (symlinks kept) so a test can add files.
func copyHost(t *testing.T, host string) string {
	t.Helper()
	src, _ := filepath.Abs("../fixtures/hosts/" + host)
	dst := filepath.Join(t.TempDir(), host)
	hostfstest.CopyTree(t, src, dst)
	return dst
}

func addUmad(t *testing.T, root, dev string) {
	t.Helper()
	for name, v := range map[string]string{"sys/class/infiniband_mad/abi_version": "5", "sys/class/infiniband_mad/umad0/ibdev": dev,
		"sys/class/infiniband_mad/umad0/port": "1", "dev/infiniband/umad0": ""} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sminfo is a host option: sminfo runs, from path.
func sminfo(path string) func(*rdmahost.Options) {
	return func(o *rdmahost.Options) { o.SM = &rdmahost.SMOptions{SminfoPath: path} }
}

func fakeTool(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSMSminfo(t *testing.T) {
	root := copyHost(t, "sm-opensm")
	addUmad(t, root, "mlx5_0")
	rec, _ := filepath.Abs("../fixtures/tools/sminfo-master-ibsim.txt")
	env := hostEnv(t, root, sminfo(fakeTool(t, "sminfo", "cat "+rec+"\n")))
	// No loop runs: each gather's snapshot runs one round.
	c := on(env, NewSMCollector())
	want := `
# HELP rdma_sm_info The subnet manager sminfo reached through this port (latest answer); always 1.
# TYPE rdma_sm_info gauge
rdma_sm_info{device="mlx5_0",port="1",sm_guid="0x0000000000100001",sm_lid="4",state="MASTER"} 1
# HELP rdma_sm_priority Priority of the subnet manager sminfo reached, 0-15 (latest answer).
# TYPE rdma_sm_priority gauge
rdma_sm_priority{device="mlx5_0",port="1"} 14
# HELP rdma_sm_state State of the subnet manager sminfo reached: 0 NOTACTIVE, 1 DISCOVERING, 2 STANDBY, 3 MASTER (latest answer).
# TYPE rdma_sm_state gauge
rdma_sm_state{device="mlx5_0",port="1"} 3
# HELP rdma_sm_activity_count SMInfo ActCount of the subnet manager sminfo reached (latest answer); a working master increments it.
# TYPE rdma_sm_activity_count gauge
rdma_sm_activity_count{device="mlx5_0",port="1"} 411
# HELP rdma_sm_activity_stalled 1 when the same SM answered twice in a row without its activity count rising.
# TYPE rdma_sm_activity_stalled gauge
rdma_sm_activity_stalled{device="mlx5_0",port="1"} 0
# HELP rdma_sm_sminfo_success 1 when the latest sminfo run through this port got an answer, 0 when it failed.
# TYPE rdma_sm_sminfo_success gauge
rdma_sm_sminfo_success{device="mlx5_0",port="1"} 1
`
	names := []string{"rdma_sm_info", "rdma_sm_priority", "rdma_sm_state", "rdma_sm_activity_count", "rdma_sm_activity_stalled", "rdma_sm_sminfo_success"}
	if err := testutil.GatherAndCompare(gatherOne(t, "sm", c), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	// The same answer again (the next gather's round): the activity
	// count did not rise.
	want = strings.Replace(want, `rdma_sm_activity_stalled{device="mlx5_0",port="1"} 0`, `rdma_sm_activity_stalled{device="mlx5_0",port="1"} 1`, 1)
	if err := testutil.GatherAndCompare(gatherOne(t, "sm", c), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

func TestFabricCollector(t *testing.T) {
	rec, _ := filepath.Abs("../fixtures/tools/iblinkinfo-l-generated-hdr-fdr-downgrade.txt")
	tool := fakeTool(t, "iblinkinfo", "cat "+rec+"\n")
	mk := func(degradedOnly bool) (*FabricCollector, *rdmahost.Host) {
		return fabricOn(t, FabricOptions{FabricOptions: rdmahost.FabricOptions{Path: tool}, DegradedOnly: degradedOnly})
	}
	fc, h := mk(false)
	c := hosted{fc, h}
	if n, _ := testutil.GatherAndCount(gatherOne(t, "fabric", c), "rdma_fabric_links", "rdma_fabric_scan_success"); n != 0 {
		t.Errorf("%d series before the first scan", n)
	}
	ctx := context.Background()
	h.Round(ctx)
	g := gatherOne(t, "fabric", c)
	want := `
# HELP rdma_fabric_links_degraded Links iblinkinfo says could run wider or faster than they do ("Could be ...").
# TYPE rdma_fabric_links_degraded gauge
rdma_fabric_links_degraded 2
# HELP rdma_fabric_links Links in the fabric (each counted once, not once per end).
# TYPE rdma_fabric_links gauge
rdma_fabric_links 8
# HELP rdma_fabric_switches Switches in the fabric.
# TYPE rdma_fabric_switches gauge
rdma_fabric_switches 3
# HELP rdma_fabric_cas Channel adapters in the fabric, counted by GUID (node descriptions are not unique).
# TYPE rdma_fabric_cas gauge
rdma_fabric_cas 4
# HELP rdma_fabric_link_could_be_info What iblinkinfo says a degraded link could run at (empty when only the other one is below); always 1.
# TYPE rdma_fabric_link_could_be_info gauge
rdma_fabric_link_could_be_info{guid="0x1070fd0300a1b400",node="MF0;leaf2:MQM8700/U1",port="1",remote_guid="0xb83fd20300a41f60",remote_node="gpu03 mlx5_0",remote_port="1",speed="53.125 Gbps",width=""} 1
rdma_fabric_link_could_be_info{guid="0x1070fd0300a1b400",node="MF0;leaf2:MQM8700/U1",port="2",remote_guid="0xb83fd20300a41f70",remote_node="gpu04 mlx5_0",remote_port="1",speed="",width="4X"} 1
`
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), "rdma_fabric_links_degraded", "rdma_fabric_links",
		"rdma_fabric_switches", "rdma_fabric_cas", "rdma_fabric_link_could_be_info"); err != nil {
		t.Error(err)
	}
	if n, _ := testutil.GatherAndCount(g, "rdma_fabric_link_degraded", "rdma_fabric_link_info", "rdma_fabric_link_state", "rdma_fabric_link_rate_bytes_per_second"); n != 4*8 {
		t.Errorf("%d per-link series, want 32", n)
	}
	// The per-link block is rendered once per scan and resent by each
	// scrape.
	scan := func() *fabric.Fabric { return h.Snapshot().FabricScan(ctx).Fabric }
	first := fc.linkBlock(scan())
	if again := fc.linkBlock(scan()); first.Len() != 4*8+2 || again != first {
		t.Errorf("per-link block rebuilt for the same scan (%d series)", first.Len())
	}
	h.Round(ctx)
	if next := fc.linkBlock(scan()); next == first {
		t.Error("a new scan reused the previous scan's block")
	}
	fc, h = mk(true)
	h.Round(ctx)
	if n, _ := testutil.GatherAndCount(gatherOne(t, "fabric", hosted{fc, h}), "rdma_fabric_link_degraded"); n != 2 {
		t.Errorf("degraded-only: %d link series, want 2", n)
	}
}

// The running opensm's log (a real opensm 3.3.23 log, on ibsim) on a copy
// of sm-opensm: last SUBNET UP, last state, numbered error lines.
func TestSMOpenSMLog(t *testing.T) {
	root := copyHost(t, "sm-opensm")
	b, err := os.ReadFile("../fixtures/tools/opensm-master-ibsim.log")
	if err != nil {
		t.Fatal(err)
	}
	// One numbered error after the sweep (the standby recording's).
	b = append(b, "Nov 30 16:39:51 535506 [918256C0] 0x01 -> log_send_error: ERR 5411: DR SMP Send completed with error (IB_TIMEOUT) -- dropping\n\t\t\tMethod 0x1, Attr 0x20, TID 0x12e3\n"...)
	if err := os.MkdirAll(filepath.Join(root, "var/log"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "var/log/opensm.log"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	env := hostEnv(t, root, sminfo("/nonexistent"), func(o *rdmahost.Options) {
		o.Now = func() time.Time { return time.Date(2026, 11, 30, 20, 0, 0, 0, time.UTC) }
	})
	c := on(env, NewSMCollector())
	want := `
# HELP rdma_sm_opensm_log_error_lines Numbered error lines ("ERR xxxx:") in the running opensm's log read so far; 0 again after a rotation.
# TYPE rdma_sm_opensm_log_error_lines gauge
rdma_sm_opensm_log_error_lines{path="/var/log/opensm.log"} 1
# HELP rdma_sm_opensm_log_state_info The SM state of the last "Entering <STATE> state" line in the running opensm's log; always 1.
# TYPE rdma_sm_opensm_log_state_info gauge
rdma_sm_opensm_log_state_info{path="/var/log/opensm.log",state="MASTER"} 1
# HELP rdma_sm_opensm_log_subnet_up_timestamp_seconds When the running opensm last logged SUBNET UP, in seconds since the epoch.
# TYPE rdma_sm_opensm_log_subnet_up_timestamp_seconds gauge
rdma_sm_opensm_log_subnet_up_timestamp_seconds{path="/var/log/opensm.log"} 1.796056751408113e+09
`
	if err := testutil.GatherAndCompare(gatherOne(t, "sm", c), strings.NewReader(want),
		"rdma_sm_opensm_log_error_lines", "rdma_sm_opensm_log_state_info", "rdma_sm_opensm_log_subnet_up_timestamp_seconds"); err != nil {
		t.Error(err)
	}
	if n, _ := testutil.GatherAndCount(gatherOne(t, "sm", on(hostEnv(t, "../fixtures/hosts/sm-opensm", sminfo("/nonexistent")), NewSMCollector())),
		"rdma_sm_opensm_log_error_lines"); n != 0 {
		t.Errorf("%d log series without a log", n)
	}
}

// TestSMSminfoFailureIsCollectorError: an sminfo that fails through a port
// it can use (the SM stopped: recorded ibsim output, exit 255) makes
// rdma_sm_sminfo_success 0 and the collector's success 0, since the SM
// series it exists for are missing. One that cannot run here at all
// (sminfo not installed; no umad access, recorded on a machine without
// ib_umad) leaves both out of it: that is the host's deployment, the same
// on every scrape, and counted by rdma_sm_sminfo_failures_total only.
func TestSMSminfoFailureIsCollectorError(t *testing.T) {
	rec := func(name string) string { p, _ := filepath.Abs("../fixtures/tools/" + name); return p }
	for _, tc := range []struct {
		name, path string
		success    string // the rdma_sm_sminfo_success line, "" when absent
		collector  float64
	}{
		{"sm stopped", fakeTool(t, "sminfo", "cat "+rec("sminfo-sm-stopped-ibsim.combined.txt")+" >&2\nexit 255\n"), "0", 0},
		{"no umad access", fakeTool(t, "sminfo", "cat "+rec("sminfo-no-umad-debian.combined.txt")+"\nexit 255\n"), "", 1},
		{"not installed", filepath.Join(t.TempDir(), "sminfo"), "", 1},
		{"answers", fakeTool(t, "sminfo", "cat "+rec("sminfo-master-ibsim.txt")+"\n"), "1", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := copyHost(t, "sm-opensm")
			addUmad(t, root, "mlx5_0")
			// Each gather runs a round: no loop runs.
			env := hostEnv(t, root, sminfo(tc.path))
			g := gatherOne(t, "sm", on(env, NewSMCollector()))
			want := "# HELP rdma_scrape_collector_success Whether a collector succeeded (1) or met errors or its deadline (0).\n" +
				"# TYPE rdma_scrape_collector_success gauge\n" +
				"rdma_scrape_collector_success{collector=\"sm\"} " + strconv.FormatFloat(tc.collector, 'g', -1, 64) + "\n"
			if err := testutil.GatherAndCompare(g, strings.NewReader(want), "rdma_scrape_collector_success"); err != nil {
				t.Error(err)
			}
			n, _ := testutil.GatherAndCount(g, "rdma_sm_sminfo_success")
			if (tc.success == "") != (n == 0) {
				t.Errorf("%d rdma_sm_sminfo_success series, want it %q", n, tc.success)
			}
			if tc.success != "" {
				if v := valueOf(t, g, "rdma_sm_sminfo_success"); strconv.FormatFloat(v, 'g', -1, 64) != tc.success {
					t.Errorf("rdma_sm_sminfo_success %v, want %s", v, tc.success)
				}
			}
			if f, _ := testutil.GatherAndCount(g, "rdma_sm_sminfo_failures_total"); f != 1 {
				t.Errorf("%d rdma_sm_sminfo_failures_total series, want 1 in every case", f)
			}
		})
	}
}

// TestFabricScanFailureIsCollectorError: a failed scan is
// rdma_fabric_scan_success 0 and a collector error; the previous scan's
// fabric stays exported.
func TestFabricScanFailureIsCollectorError(t *testing.T) {
	rec, _ := filepath.Abs("../fixtures/tools/iblinkinfo-l-generated-hdr-fdr-downgrade.txt")
	flag := filepath.Join(t.TempDir(), "fail")
	fc, h := fabricOn(t, FabricOptions{FabricOptions: rdmahost.FabricOptions{
		Path: fakeTool(t, "iblinkinfo", "[ -e "+flag+" ] && { echo 'iblinkinfo: iberror: failed: discover failed' >&2; exit 255; }\ncat "+rec+"\n")}})
	c := hosted{fc, h}
	success := func() (scan, collector float64) {
		g := gatherOne(t, "fabric", c)
		return valueOf(t, g, "rdma_fabric_scan_success"), valueOf(t, g, "rdma_scrape_collector_success")
	}
	h.Round(context.Background())
	if s, col := success(); s != 1 || col != 1 {
		t.Errorf("good scan: scan success %v, collector success %v", s, col)
	}
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.Round(context.Background())
	if s, col := success(); s != 0 || col != 0 {
		t.Errorf("failed scan: scan success %v, collector success %v; want 0, 0", s, col)
	}
	if n, _ := testutil.GatherAndCount(gatherOne(t, "fabric", c), "rdma_fabric_links"); n != 1 {
		t.Error("the previous scan's fabric is gone after a failed scan")
	}
}

// valueOf is the value of the one series of a gauge family; it fails the
// test when there is not exactly one.
func valueOf(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			if len(mf.GetMetric()) != 1 {
				t.Fatalf("%d %s series, want 1", len(mf.GetMetric()), name)
			}
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}
