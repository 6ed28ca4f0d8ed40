// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
)

// nodeExporterVersion is the node_exporter the compatibility rules are
// checked against: the one make bench and make wakeups install
// (TestCompatNodeExporter fails when the Makefile pins another).
const nodeExporterVersion = "v1.10.1"

// nodeExporterFailed are the fixture hosts on which node_exporter's
// infiniband collector exports nothing (node_scrape_collector_success 0),
// with why: procfs reads the whole class or nothing, so one missing or
// unparsable file on one port loses every device of the host. rdma_doctor
// exports what it could read there, so the recorded series have no
// node_exporter series to equal. docs/migration.md lists the same hosts.
var nodeExporterFailed = map[string]string{
	"bnxt_re-roce":  "a port file procfs requires is absent (ErrNoData)",
	"broken":        "mlx5_1's state file is empty",
	"cxgb4-iwarp":   "a port file procfs requires is absent (ErrNoData)",
	"epyc-genoa":    "a port file procfs requires is absent (ErrNoData)",
	"siw-softiwarp": "a port file procfs requires is absent (ErrNoData)",
}

// nodeExporterOnly are node_exporter's infiniband series that have no
// equivalent in rdma_doctor (docs/migration.md says why): the
// counters_ext files of mlx4, which duplicate counters/ under other names.
var nodeExporterOnly = []string{
	"node_infiniband_legacy_data_received_bytes_total",
	"node_infiniband_legacy_data_transmitted_bytes_total",
	"node_infiniband_legacy_multicast_packets_received_total",
	"node_infiniband_legacy_multicast_packets_transmitted_total",
	"node_infiniband_legacy_packets_received_total",
	"node_infiniband_legacy_packets_transmitted_total",
	"node_infiniband_legacy_unicast_packets_received_total",
	"node_infiniband_legacy_unicast_packets_transmitted_total",
}

// nodeExporter finds node_exporter at the pinned version: the binary named
// by RDMA_DOCTOR_NODE_EXPORTER, else the one make bench installs into the
// user's cache, else it installs it there (go install, as make bench
// does). A failed install fails the test: it is never skipped.
func nodeExporter(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("RDMA_DOCTOR_NODE_EXPORTER"); bin != "" {
		return bin
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("node_exporter: no cache directory to install it into: %v (set RDMA_DOCTOR_NODE_EXPORTER)", err)
	}
	dir := filepath.Join(cache, "rdma_doctor-bench", "node_exporter-"+nodeExporterVersion)
	bin := filepath.Join(dir, "node_exporter")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	cmd := exec.Command("go", "install", "github.com/prometheus/node_exporter@"+nodeExporterVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install node_exporter@%s into %s: %v\n%s", nodeExporterVersion, dir, err, out)
	}
	return bin
}

// promSeries is one series of an instant query's answer.
type promSeries struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func promQuery(t *testing.T, prom *daemon, q string) []promSeries {
	t.Helper()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []promSeries `json:"result"`
		} `json:"data"`
	}
	getJSON(t, "http://"+prom.addr+"/api/v1/query?query="+url.QueryEscape(q), &r)
	if r.Status != "success" {
		t.Fatalf("query %s: %s", q, r.Error)
	}
	return r.Data.Result
}

// seriesKey is a series by its name and labels, job and instance left out
// (they name the exporter, which is what differs).
func seriesKey(m map[string]string) string {
	var parts []string
	for k, v := range m {
		if k != "__name__" && k != "job" && k != "instance" {
			parts = append(parts, k+"="+v)
		}
	}
	sort.Strings(parts)
	return m["__name__"] + "{" + strings.Join(parts, ",") + "}"
}

// TestCompatNodeExporter runs the real node_exporter (its infiniband
// collector alone, at the pinned version) and rdma_doctor on every fixture
// host, one Prometheus scraping both with alerts/compat's rules loaded, and
// requires the node_infiniband_* series recorded from rdma_doctor's to
// equal node_exporter's own, value for value and label for label. The only
// differences allowed are the listed ones: the hosts where node_exporter's
// collector fails as a whole, and the series with no equivalent here.
// infiniband_exporter.rules.yml is loaded too, so the real Prometheus
// parses it.
func TestCompatNodeExporter(t *testing.T) {
	promBin := requireTool(t, "prometheus")
	mk, err := os.ReadFile(filepath.Join(repoRoot(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "node_exporter@"+nodeExporterVersion) {
		t.Fatalf("the Makefile does not install node_exporter@%s: the pinned version moved, move nodeExporterVersion with it", nodeExporterVersion)
	}
	neBin := nodeExporter(t)

	dir := t.TempDir()
	var neTargets, rdTargets strings.Builder
	for _, h := range hosts(t) {
		root := filepath.Join(repoRoot(t), "fixtures", "hosts", h)
		ne := startDaemon(t, "node_exporter "+h, neBin, "/metrics",
			"--collector.disable-defaults", "--collector.infiniband",
			"--path.sysfs="+filepath.Join(root, "sys"), "--web.listen-address=ADDR")
		rd := start(t, append(hostArgs(t, h), "--collector.disable-defaults", "--collector.infiniband")...)
		fmt.Fprintf(&neTargets, "      - targets: [%q]\n        labels: {host: %q}\n", ne.addr, h)
		fmt.Fprintf(&rdTargets, "      - targets: [%q]\n        labels: {host: %q}\n", rd.addr, h)
	}
	compat := filepath.Join(repoRoot(t), "alerts", "compat")
	cfg := filepath.Join(dir, "prometheus.yml")
	writeFile(t, cfg, fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q, %q]
scrape_configs:
  - job_name: node
    static_configs:
%s  - job_name: rdma_doctor
    static_configs:
%s`, filepath.Join(compat, "node_exporter.rules.yml"), filepath.Join(compat, "infiniband_exporter.rules.yml"),
		neTargets.String(), rdTargets.String()))
	prom := startDaemon(t, "prometheus", promBin, "/-/ready",
		"--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "prom-data"), "--web.listen-address=ADDR")

	// Wait for every target's first scrape and a rule evaluation after it:
	// the recorded series of every host are there once each host has its
	// rdma_device_info recorded (every fixture host with a device: a
	// host without RDMA records none).
	n, all := 0, len(hosts(t))
	for _, h := range hosts(t) {
		if devs, _ := os.ReadDir(filepath.Join(repoRoot(t), "fixtures", "hosts", h, "sys", "class", "infiniband")); len(devs) > 0 {
			n++
		}
	}
	var diff []string
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
		up := promQuery(t, prom, `count(up == 1)`)
		info := promQuery(t, prom, `count(count by (host) (node_infiniband_info{job="rdma_doctor"}))`)
		if len(up) == 1 && up[0].Value[1] == fmt.Sprint(2*all) && len(info) == 1 && info[0].Value[1] == fmt.Sprint(n) {
			if diff = compareCompat(t, prom); len(diff) == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90 s the recorded node_infiniband_* series differ from node_exporter's (up: %v, hosts recorded: %v):\n%s\nPrometheus log:\n%s",
				up, info, strings.Join(diff, "\n"), prom.out.String())
		}
	}
}

// compareCompat lists how the series recorded from rdma_doctor differ from
// node_exporter's, the allowed differences left out; it also fails on an
// allowed difference that no longer shows, so the lists (and
// docs/migration.md) stay true.
func compareCompat(t *testing.T, prom *daemon) []string {
	t.Helper()
	ne := map[string]string{}
	for _, s := range promQuery(t, prom, `{__name__=~"node_infiniband_.*", job="node"}`) {
		ne[seriesKey(s.Metric)] = fmt.Sprint(s.Value[1])
	}
	ours := map[string]string{}
	byHost := map[string]int{}
	for _, s := range promQuery(t, prom, `{__name__=~"node_infiniband_.*", job="rdma_doctor"}`) {
		ours[seriesKey(s.Metric)] = fmt.Sprint(s.Value[1])
		byHost[s.Metric["host"]]++
	}
	failed := map[string]bool{}
	for _, s := range promQuery(t, prom, `node_scrape_collector_success{collector="infiniband"} == 0`) {
		failed[s.Metric["host"]] = true
	}
	var diff []string
	// A host without RDMA hardware (no /sys/class/infiniband): node_exporter's
	// collector fails there, and nothing is recorded from rdma_doctor,
	// which exports no device.
	for _, h := range hosts(t) {
		if devs, _ := os.ReadDir(filepath.Join(repoRoot(t), "fixtures", "hosts", h, "sys", "class", "infiniband")); len(devs) > 0 {
			continue
		}
		if byHost[h] != 0 {
			diff = append(diff, fmt.Sprintf("%s: no RDMA device, yet %d series recorded from rdma_doctor", h, byHost[h]))
		}
		if !failed[h] {
			diff = append(diff, fmt.Sprintf("%s: no RDMA device, yet node_exporter's infiniband collector succeeded", h))
		}
		delete(failed, h)
	}
	for h, why := range nodeExporterFailed {
		if !failed[h] {
			diff = append(diff, fmt.Sprintf("%s: node_exporter's infiniband collector succeeded; nodeExporterFailed says %q", h, why))
		}
		if byHost[h] == 0 {
			diff = append(diff, fmt.Sprintf("%s: nothing recorded from rdma_doctor", h))
		}
	}
	for h := range failed {
		if _, ok := nodeExporterFailed[h]; !ok {
			diff = append(diff, fmt.Sprintf("%s: node_exporter's infiniband collector failed; not in nodeExporterFailed", h))
		}
	}
	only := map[string]bool{}
	for _, n := range nodeExporterOnly {
		only[n] = true
	}
	seenOnly := map[string]bool{}
	for k, v := range ne {
		name := k[:strings.Index(k, "{")]
		if only[name] {
			seenOnly[name] = true
			if _, ok := ours[k]; ok {
				diff = append(diff, "recorded though nodeExporterOnly lists it: "+k)
			}
			continue
		}
		if w, ok := ours[k]; !ok {
			diff = append(diff, fmt.Sprintf("node_exporter only: %s %s", k, v))
		} else if w != v {
			diff = append(diff, fmt.Sprintf("%s: node_exporter %s, recorded %s", k, v, w))
		}
	}
	for _, n := range nodeExporterOnly {
		if !seenOnly[n] {
			diff = append(diff, "no fixture host shows "+n+": nodeExporterOnly is out of date")
		}
	}
	for k, v := range ours {
		if _, ok := ne[k]; ok {
			continue
		}
		h := k[strings.Index(k, "host=")+len("host="):]
		if i := strings.IndexAny(h, ",}"); i >= 0 {
			h = h[:i]
		}
		if _, ok := nodeExporterFailed[h]; !ok {
			diff = append(diff, fmt.Sprintf("recorded only: %s %s", k, v))
		}
	}
	sort.Strings(diff)
	return diff
}

// treydockMetrics are treydock/infiniband_exporter's metric names, read
// from its source at v0.10.0 (commit 992ebe1: collectors/switch.go, hca.go,
// collectors.go): its switch and HCA families. treydock is not run here
// (it is not on the Go module proxy and needs a fabric), so
// TestCompatInfinibandExporterNames holds the rules to this list and to our
// own fabric series' names instead of to its live output.
var treydockMetrics = func() map[string]bool {
	m := map[string]bool{}
	ports := []string{"transmit_data_bytes_total", "receive_data_bytes_total", "transmit_packets_total", "receive_packets_total",
		"unicast_transmit_packets_total", "unicast_receive_packets_total", "multicast_transmit_packets_total", "multicast_receive_packets_total",
		"symbol_error_total", "link_error_recovery_total", "link_downed_total", "receive_errors_total",
		"receive_remote_physical_errors_total", "receive_switch_relay_errors_total", "transmit_discards_total",
		"transmit_constraint_errors_total", "receive_constraint_errors_total", "local_link_integrity_errors_total",
		"excessive_buffer_overrun_errors_total", "vl15_dropped_total", "transmit_wait_total", "qp1_dropped_total",
		"local_physical_errors_total", "malformed_packet_errors_total", "buffer_overrun_errors_total",
		"dli_mapping_errors_total", "vl_mapping_errors_total", "looping_errors_total"}
	for _, fam := range []string{"switch", "hca"} {
		for _, p := range ports {
			m["infiniband_"+fam+"_port_"+p] = true
		}
		for _, n := range []string{"collect_duration_seconds", "collect_error", "collect_timeout", "uplink_info", "info"} {
			m["infiniband_"+fam+"_"+n] = true
		}
	}
	for _, n := range []string{"infiniband_switch_port_rate_bytes_per_second", "infiniband_switch_port_raw_rate_bytes_per_second",
		"infiniband_hca_rate_bytes_per_second", "infiniband_hca_raw_rate_bytes_per_second"} {
		m[n] = true
	}
	return m
}()

// TestCompatInfinibandExporterNames: every name infiniband_exporter.rules.yml
// records is one of treydock's, and every series it reads is one the fabric
// collector exports (the port counters from fabric.Counters, the one list
// the collector builds its descriptors from).
func TestCompatInfinibandExporterNames(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "alerts", "compat", "infiniband_exporter.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{"rdma_fabric_node_info": true, "rdma_fabric_link_rate_bytes_per_second": true, "rdma_fabric_port_physical_state": true}
	for _, c := range fabric.Counters {
		ours["rdma_fabric_port_"+c.Spec.Metric] = true
	}
	recorded := 0
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			recorded++
			if !treydockMetrics[r.Record] {
				t.Errorf("%s is not one of treydock's metrics", r.Record)
			}
			for _, n := range regexp.MustCompile(`rdma_[a-z0-9_]+`).FindAllString(r.Expr, -1) {
				if !ours[n] {
					t.Errorf("%s reads %s, which the fabric collector does not export", r.Record, n)
				}
			}
		}
	}
	if recorded == 0 {
		t.Fatal("no rules in infiniband_exporter.rules.yml")
	}
}
