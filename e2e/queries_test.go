// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"

	"github.com/rdma-doctor/rdma_doctor/alerts"
	"github.com/rdma-doctor/rdma_doctor/dashboards"
	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric/fabrictest"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest/perftesttest"
)

// pending lists metric names that DESIGN.md promises and the alerts and
// dashboards already use, but that no collector exports yet.
// TestQueriesNameExportedMetrics prints each use of one with t.Log instead
// of failing. This is the only escape hatch, and it is empty: every name
// the alerts and dashboards use is exported by a golden host or by the
// live run of exportedWithBackgroundWork. An entry ending in "_*" stands for
// a family DESIGN.md names only by prefix.
var pending = []string{}

// prometheusMade are series Prometheus itself writes, not the exporter.
var prometheusMade = []string{"up", "ALERTS", "ALERTS_FOR_STATE"}

// liveKernelOnly are metrics the exporter exports only when the ethtool
// ioctl reaches a real kernel netdev, which no fixture tree can give: a
// fixture run never queries ethtool. TestNetdevLive scrapes the binary
// against veths in a private network namespace and checks it exports them.
var liveKernelOnly = []string{"rdma_netdev_ethtool_stat_total"}

// devlinkOnly are the devlink collector's metrics: only the running
// kernel's devlink family answers, never for a fixture tree, and CI
// kernels have no RDMA functions (this one has no devlink family at all).
// collector.TestDevlinkCollector gathers them from a fake kernel.
var devlinkOnly = []string{"rdma_devlink_health_reporter_state", "rdma_device_firmware_pending", "rdma_device_firmware_version_info"}

// liveRoCEOnly are metrics exported only from a live RoCE host: DCB
// netlink and RDMA netlink answer only for the running kernel's devices
// (never on a fixture tree), ethtool's per-priority statistics come only
// from a real mlx5 netdev (veths have none), and no fixture records the
// MLNX_OFED ECN sysfs files. CI kernels have no RDMA device. The alerts
// on them are checked by promtool cases (alerts/tests/roce.yml); their
// decoders by internal/read/rdmanl's and internal/read/roce's tests.
var liveRoCEOnly = []string{
	"rdma_netdev_priority_stat_total", "rdma_roce_pfc_enabled", "rdma_roce_pfc_frames_total", "rdma_roce_trust_dscp",
	"rdma_roce_global_pause_enabled", "rdma_roce_ecn_enabled", "rdma_port_optional_counter_total", "rdma_optional_counter_enabled",
}

// moduleOnly are the transceiver memory series of
// --collector.netdev.module-eeprom: read only from a RoCE netdev of the
// running kernel with a module in its cage (MODULE_EEPROM_GET, needs
// CAP_NET_ADMIN), never on a fixture tree. collector.TestNetdevModuleSeriesDR8
// exports them from a recorded module memory; the alerts on them are
// checked by promtool cases (alerts/tests/module.yml).
var moduleOnly = []string{
	"rdma_netdev_module_eeprom_readable", "rdma_netdev_module_info", "rdma_netdev_module_temperature_celsius",
	"rdma_netdev_module_temperature_threshold_celsius", "rdma_netdev_module_rx_power_watts",
	"rdma_netdev_module_rx_power_threshold_watts",
}

// rdmaNetlinkOnly are the rdma_netlink collector's series: RDMA netlink
// answers only for the running kernel's devices (never on a fixture tree),
// and the opt-in ones only with --collector.rdma_netlink.process-resources
// or .qp-counters. collector.TestRDMANetlinkOptIn exports the opt-in ones
// from recorded replies; rdma_device_resources is the resource summary
// the same collector exports (decoded by internal/read/rdmanl's tests).
var rdmaNetlinkOnly = []string{
	"rdma_device_resources", "rdma_resource_process_objects", "rdma_resource_process_capped", "rdma_resource_dump_truncated",
	"rdma_port_qp_counter_mode", "rdma_port_qp_counters", "rdma_port_qp_counter_qps", "rdma_port_qp_counter_dump_truncated",
}

// readerOnly are metrics exported only once a background reader has met
// something no fixture tree holds: a kernel log with a driver message
// (TestKernelLogEvents feeds a fake /dev/kmsg and checks it is exported).
var readerOnly = []string{"rdma_kernel_events_total"}

// goldenNames are the metric names in fixtures/golden/*.metrics.
func goldenNames(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "fixtures", "golden", "*.metrics"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	names := map[string]bool{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		addExposition(names, bufio.NewScanner(fh))
		fh.Close()
	}
	return names
}

// addExposition adds the sample names of a text exposition.
func addExposition(names map[string]bool, sc *bufio.Scanner) {
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if i := strings.IndexAny(l, "{ "); i > 0 {
			names[l[:i]] = true
		}
	}
}

// ruleExprs returns every expression of the shipped rules, and the names
// the recording rules define.
func ruleExprs(t *testing.T) (exprs map[string]string, records map[string]bool) {
	t.Helper()
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert  string `yaml:"alert"`
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(alerts.Rules, &f); err != nil {
		t.Fatal(err)
	}
	exprs, records = map[string]string{}, map[string]bool{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			exprs["rule "+r.Alert+r.Record] = r.Expr
			if r.Record != "" {
				records[r.Record] = true
			}
		}
	}
	return exprs, records
}

// selectorNames returns, for every vector selector in expr, either its
// metric name or, for a {__name__=~"..."} selector, the regexp matcher.
func selectorNames(t *testing.T, expr string) (names []string, regexps []*labels.Matcher) {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %v", expr, err)
		return nil, nil
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if vs.Name != "" {
			names = append(names, vs.Name)
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel {
				if m.Type == labels.MatchEqual {
					names = append(names, m.Value)
				} else {
					regexps = append(regexps, m)
				}
			}
		}
		return nil
	})
	return names, regexps
}

// TestQueriesNameExportedMetrics parses every alert, recording rule and
// dashboard query with the Prometheus parser and checks that every metric
// it names is exported: it is in a golden /metrics output of some fixture
// host, or in a live scrape of the built binary (the goldens leave out
// build info and timings), or defined by a recording rule, or written by
// Prometheus itself (up, ALERTS). Names DESIGN.md promises but no collector
// exports yet are in pending and only printed.
func TestQueriesNameExportedMetrics(t *testing.T) {
	testenv.Long(t, "every rule and dashboard query against two served fixture hosts (12 s)")
	exported := goldenNames(t)
	for _, host := range []string{"dgx-h100", "cx6-hdr-fdr"} {
		_, body := start(t, hostArgs(t, host)...).get(t, "/metrics")
		addExposition(exported, bufio.NewScanner(strings.NewReader(body)))
	}
	addExposition(exported, bufio.NewScanner(strings.NewReader(exportedWithBackgroundWork(t))))
	exprs, records := ruleExprs(t)
	known := map[string]string{}
	for n := range exported {
		known[n] = "exported"
	}
	for n := range records {
		known[n] = "recording rule"
	}
	for _, n := range prometheusMade {
		known[n] = "Prometheus"
	}
	for _, n := range liveKernelOnly {
		known[n] = "live kernel (TestNetdevLive)"
	}
	for _, n := range readerOnly {
		known[n] = "a reader's event (TestKernelLogEvents)"
	}
	for _, n := range devlinkOnly {
		known[n] = "live devlink (collector.TestDevlinkCollector)"
	}
	for _, n := range liveRoCEOnly {
		known[n] = "live RoCE host"
	}
	for _, n := range rdmaNetlinkOnly {
		known[n] = "live RDMA netlink (collector.TestRDMANetlinkOptIn)"
	}
	for _, n := range moduleOnly {
		known[n] = "a live module memory (collector.TestNetdevModuleSeriesDR8)"
	}

	qs, err := dashboards.Queries()
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range qs {
		expr, err := dashboards.Expand(q.Expr)
		if err != nil {
			t.Error(err)
			continue
		}
		// A panel can have several queries: number them.
		exprs[fmt.Sprintf("dashboard %s %q #%d", q.File, q.Where, i)] = expr
	}
	if len(exprs) < 80 {
		t.Fatalf("only %d expressions found", len(exprs))
	}

	isPending := func(name string) bool {
		for _, p := range pending {
			if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(name, prefix) || p == name {
				return true
			}
		}
		return false
	}
	pendingUses := map[string][]string{}
	where := make([]string, 0, len(exprs))
	for w := range exprs {
		where = append(where, w)
	}
	sort.Strings(where)
	for _, w := range where {
		names, regexps := selectorNames(t, exprs[w])
		for _, n := range names {
			switch {
			case known[n] != "":
			case isPending(n):
				pendingUses[n] = append(pendingUses[n], w)
			default:
				t.Errorf("%s names %s, which the exporter does not export (not in fixtures/golden, a live scrape, a recording rule, or pending)", w, n)
			}
		}
		for _, m := range regexps {
			matched := false
			for n := range known {
				if m.Matches(n) {
					matched = true
					break
				}
			}
			if matched {
				continue
			}
			// A family selector is pending when its pattern is.
			fam := ""
			for _, p := range pending {
				if prefix, ok := strings.CutSuffix(p, "*"); ok && m.Matches(prefix+"x") {
					fam = p
				}
			}
			if fam == "" {
				t.Errorf("%s: selector %s matches no exported metric", w, m)
				continue
			}
			pendingUses[fam] = append(pendingUses[fam], w)
		}
	}

	// The pending report, for the lead.
	for _, p := range pending {
		prefix, family := strings.CutSuffix(p, "*")
		stale := false
		for n := range exported {
			if n == p || family && strings.HasPrefix(n, prefix) {
				stale = true
				break
			}
		}
		switch uses := pendingUses[p]; {
		case stale:
			t.Logf("STALE PENDING %s: now exported; remove it from pending in e2e/queries_test.go", p)
		case len(uses) > 0:
			t.Logf("PENDING %s: not exported yet; used by %d queries (%s)", p, len(uses), uses[0])
		default:
			t.Logf("PENDING %s: no query uses it; remove it from pending", p)
		}
	}
}

// TestSelectorNames guards the extraction itself, so a parser change cannot
// make the check above pass vacuously.
func TestSelectorNames(t *testing.T) {
	names, regexps := selectorNames(t, `sum(rate(a_total{x="1"}[5m])) / on (i) b or {__name__="c"} or {__name__=~"d_.+", j="2"} unless vector(0)`)
	if strings.Join(names, ",") != "a_total,b,c" || len(regexps) != 1 || !regexps[0].Matches("d_e") {
		t.Errorf("got %v %v", names, regexps)
	}
}

// exportedWithBackgroundWork scrapes the binary with the series that no
// golden host can show because they come from background work: sminfo
// answering (a fake replaying recorded ibsim output), the fabric view (a
// fake iblinkinfo replaying the generated HDR fabric), scheduled loopback
// probes (the fake perftest replaying recorded runs), and device-level
// hw_counters (which mlx5 creates only in switchdev mode; crafted here).
func exportedWithBackgroundWork(t *testing.T) string {
	t.Helper()
	// A Slurm job holds mlx5_0 (the opt-in jobs collector's series).
	root := slurmCopyHost(t, "sm-opensm")
	smWriteFile(t, filepath.Join(root, "sys/class/infiniband_mad/umad0/ibdev"), "mlx5_0\n")
	smWriteFile(t, filepath.Join(root, "sys/class/infiniband_mad/umad0/port"), "1\n")
	smWriteFile(t, filepath.Join(root, "dev/infiniband/umad0"), "")
	smWriteFile(t, filepath.Join(root, "sys/class/infiniband/mlx5_0/hw_counters/out_of_buffer"), "0\n")
	sminfo := smFakeTool(t, "sminfo", "cat "+smToolFixture(t, "sminfo-master-ibsim.txt")+"\n")
	// The fabric tools replay a recorded ibsim fabric
	// (internal/read/fabric/testdata/ibqueryerrors): its scan and counter
	// sweep feed the fabric port series the fabric alerts and dashboard
	// use.
	tools := fabrictest.Install(t)
	perftest := perftesttest.Install(t, probeReplay())
	cfg := scheduledProbeConfig(t, perftest)
	e := start(t, "--path.rootfs="+root, "--config.file="+cfg, "--collector.sm.sminfo-path="+sminfo, "--collector.jobs",
		"--collector.fabric", "--collector.fabric.iblinkinfo-path="+tools.IBLinkInfo,
		"--collector.fabric.ibqueryerrors-path="+tools.IBQueryErrors, "--collector.fabric.ibnetdiscover-path="+tools.IBNetDiscover, "--collector.fabric.sminfo-path="+tools.SMInfo)
	want := []string{"rdma_sm_state{", "rdma_fabric_links_degraded ", "rdma_probe_bandwidth_bytes_per_second{",
		"rdma_probe_latency_seconds{", "rdma_device_hw_counter_total{", "rdma_fabric_port_symbol_errors_total{", "rdma_job_device_info{"}
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		// /probe is polled, not /metrics: the scheduler holds probes back
		// while scrapes come in.
		_, probes := e.get(t, "/probe")
		var doc struct {
			Entries []struct {
				Test string `json:"test"`
			} `json:"entries"`
		}
		if err := json.Unmarshal([]byte(probes), &doc); err != nil {
			t.Fatalf("/probe: %v\n%s", err, probes)
		}
		if len(doc.Entries) >= 2 || time.Now().After(deadline) {
			break
		}
	}
	_, body := e.get(t, "/metrics")
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("the live run with background work does not export %s\n%s", w, e.stderr.String())
		}
	}
	return body
}
