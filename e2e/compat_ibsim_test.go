// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/ibsimtest"
)

// treydockLaneRates is treydock's lane-rate table (collectors/ibnetdiscover.go
// at v0.10.0, commit 992ebe1): the effective Gb/s of one lane, by the speed
// ibnetdiscover --ports prints. treydock's rate is width x lane rate x 1e9 / 8.
var treydockLaneRates = map[string]float64{
	"SDR": 2, "DDR": 4, "QDR": 8, "FDR10": 10, "FDR": 13.64, "EDR": 25, "HDR": 50, "NDR": 100, "XDR": 250,
}

// treydockPerfquery maps each port counter infiniband_exporter.rules.yml
// records (the part of the name after infiniband_{switch,hca}_port_) to
// the perfquery field treydock reads it from (collectors/perfquery.go),
// with treydock's scale (the data counters count 4-octet words).
var treydockPerfquery = map[string]struct {
	field string
	scale float64
}{
	"transmit_data_bytes_total":             {"PortXmitData", 4},
	"receive_data_bytes_total":              {"PortRcvData", 4},
	"transmit_packets_total":                {"PortXmitPkts", 1},
	"receive_packets_total":                 {"PortRcvPkts", 1},
	"symbol_error_total":                    {"SymbolErrorCounter", 1},
	"link_error_recovery_total":             {"LinkErrorRecoveryCounter", 1},
	"link_downed_total":                     {"LinkDownedCounter", 1},
	"receive_errors_total":                  {"PortRcvErrors", 1},
	"receive_remote_physical_errors_total":  {"PortRcvRemotePhysicalErrors", 1},
	"receive_switch_relay_errors_total":     {"PortRcvSwitchRelayErrors", 1},
	"transmit_discards_total":               {"PortXmitDiscards", 1},
	"transmit_constraint_errors_total":      {"PortXmitConstraintErrors", 1},
	"receive_constraint_errors_total":       {"PortRcvConstraintErrors", 1},
	"local_link_integrity_errors_total":     {"LocalLinkIntegrityErrors", 1},
	"excessive_buffer_overrun_errors_total": {"ExcessiveBufferOverrunErrors", 1},
	"vl15_dropped_total":                    {"VL15Dropped", 1},
	"transmit_wait_total":                   {"PortXmitWait", 1},
}

// simTool runs an infiniband-diags tool on the simulator (60 s at most:
// the bound of a run, not a timed assertion), in a directory of its own
// (umad2sim writes its fake sysfs into the working directory).
func simTool(t *testing.T, s simFabric, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env, cmd.Dir = s.Env, t.TempDir()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// ibnPort is one linked port of ibnetdiscover --ports, as treydock reads it
// (collectors/ibnetdiscover.go ibnetdiscoverParse): a port without a far
// end is not listed by treydock and has no series there.
type ibnPort struct {
	typ, guid, port, name string
	rate                  float64
}

var ibnNames = regexp.MustCompile(`\( '(.+)' - '(.+)' \)`)

func ibnetdiscoverPorts(t *testing.T, out string) []ibnPort {
	t.Helper()
	var ports []ibnPort
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		m := ibnNames.FindStringSubmatch(l)
		if len(f) < 6 || m == nil {
			continue
		}
		width, err := strconv.ParseFloat(strings.TrimSuffix(f[4], "x"), 64)
		lane, ok := treydockLaneRates[f[5]]
		if err != nil || !ok {
			t.Fatalf("ibnetdiscover --ports: width %q speed %q in %q", f[4], f[5], l)
		}
		ports = append(ports, ibnPort{typ: f[0], guid: f[3], port: f[2], name: m[1], rate: width * lane * 1e9 / 8})
	}
	if len(ports) == 0 {
		t.Fatalf("no linked port in ibnetdiscover --ports:\n%s", out)
	}
	return ports
}

// perfquery reads one port's PMA counters as treydock does (perfquery -x
// -G GUID PORT), with the basic PortCounters for the error counters the
// extended set may leave out: field name to value.
func perfquery(t *testing.T, s simFabric, guid, port string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, args := range [][]string{{"-G", guid, port}, {"-x", "-G", guid, port}} {
		for _, l := range strings.Split(simTool(t, s, "perfquery", args...), "\n") {
			k, v, ok := strings.Cut(l, ":")
			if !ok {
				continue
			}
			if n, err := strconv.ParseFloat(strings.TrimLeft(v, "."), 64); err == nil {
				out[k] = n
			}
		}
	}
	return out
}

// TestCompatInfinibandExporterOnIbsim runs rdma_doctor's fabric collector
// (--collector.fabric.ca-counters) on the simulated fabric and the real
// Prometheus with alerts/compat/infiniband_exporter.rules.yml, and holds
// every series each rule records to what treydock would export there, read
// with the tools treydock runs: ibnetdiscover --ports for the info and rate
// series and for which ports have series at all (label for label), perfquery
// for the counters of two switch ports and two HCA ports, each of whose
// counters ibsim set to a value of its own. The error counters do not move,
// so they must be equal; the data and packet counters move with every MAD
// that crosses the port (the sweep's and perfquery's own), so the recorded
// value, from a sweep that started after perfquery's first read, must lie
// between that read and one made after it.
func TestCompatInfinibandExporterOnIbsim(t *testing.T) {
	promBin := requireTool(t, "prometheus")
	requireTool(t, "perfquery")
	s := startSimFabric(t)

	type portRef struct{ node, typ, name string }
	probed := []portRef{{"S-leaf001", "switch", "3"}, {"S-spine002", "switch", "4"}, {"H-host0003", "hca", "1"}, {"H-host0010", "hca", "1"}}
	// A value per port and counter, each counter of a port its own; the
	// 4-bit counters (local link integrity, excessive buffer overrun)
	// stay under 16, the 8-bit ones under 256.
	set := map[string]int{}
	for i, p := range probed {
		for j, c := range []string{"SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors",
			"PortRcvRemotePhysicalErrors", "PortRcvSwitchRelayErrors", "PortXmitDiscards", "PortXmitConstraintErrors",
			"PortRcvConstraintErrors", "LocalLinkIntegrityErrors", "ExcessiveBufferOverrunErrors", "VL15Dropped", "PortXmitWait"} {
			v := 1 + i + 4*j%15
			if !strings.HasPrefix(c, "Local") && !strings.HasPrefix(c, "Excessive") {
				v = 20*(i+1) + j + 1 // under 256: the 8-bit link counters
			}
			port, _ := strconv.Atoi(p.name)
			s.set(t, p.node, port, c, v, v)
			set[p.node+"/"+c] = v
		}
	}

	addr, logs := serveFabric(t, s, "--collector.fabric.ca-counters")
	body := metricsWhen(t, addr, logs, "a successful sweep", func(b string) bool {
		v, _ := sample(b, "rdma_fabric_counter_sweep_success")
		return v == 1
	})

	// What treydock reads: the linked ports, their rates and names.
	ports := ibnetdiscoverPorts(t, simTool(t, s, "ibnetdiscover", "--ports"))
	guidOf := map[string]string{}
	for _, p := range ports {
		guidOf[p.name] = p.guid
	}
	g := nodeGUIDs(body)
	before := map[string]map[string]float64{}
	for _, p := range probed {
		// ibsim's node names carry an S- or H- the descriptions leave out.
		desc := p.node[2:]
		if p.typ == "hca" {
			desc += " mlx5_0"
		}
		if guidOf[desc] == "" || guidOf[desc] != g[desc] {
			t.Fatalf("%s: GUID %q in ibnetdiscover, %q in rdma_fabric_node_info", desc, guidOf[desc], g[desc])
		}
		before[p.node] = perfquery(t, s, guidOf[desc], p.name)
	}
	runs0 := sweeps(body)

	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	writeFile(t, cfg, fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: rdma_doctor
    static_configs:
      - targets: [%q]
`, filepath.Join(repoRoot(t), "alerts", "compat", "infiniband_exporter.rules.yml"), addr))
	prom := startDaemon(t, "prometheus", promBin, "/-/ready",
		"--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "prom-data"), "--web.listen-address=ADDR")

	// Wait for a scrape of a sweep that started after perfquery's first
	// reads (two more completed sweeps), then for a rule evaluation after
	// that scrape: the recorded series' timestamp passes the scrape's.
	var recorded map[string]map[string]string // rule -> series key -> value
	scraped := 0.0                            // the first scrape of such a sweep
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 90 s no recorded series from a sweep after run %v (scraped at %v):\n%s\nPrometheus log:\n%s",
				runs0, scraped, ibsimtest.Tail(logs.String(), 2000), prom.out.String())
		}
		if scraped == 0 {
			r := promQuery(t, prom, fmt.Sprintf(`timestamp(rdma_fabric_counter_sweep_runs_total >= %v)`, runs0+2))
			if len(r) != 1 {
				continue
			}
			scraped, _ = strconv.ParseFloat(fmt.Sprint(r[0].Value[1]), 64)
		}
		// Each group (switch, HCA) evaluates on its own schedule: both
		// must have run since that scrape.
		evaluated := true
		for _, info := range []string{"infiniband_switch_info", "infiniband_hca_info"} {
			ev := promQuery(t, prom, `min(timestamp(`+info+`))`)
			if len(ev) != 1 {
				evaluated = false
				break
			}
			if at, _ := strconv.ParseFloat(fmt.Sprint(ev[0].Value[1]), 64); at <= scraped {
				evaluated = false
			}
		}
		if !evaluated {
			continue
		}
		recorded = map[string]map[string]string{}
		for _, s := range promQuery(t, prom, `{__name__=~"infiniband_(switch|hca)_.*"}`) {
			name := s.Metric["__name__"]
			if recorded[name] == nil {
				recorded[name] = map[string]string{}
			}
			recorded[name][seriesKey(s.Metric)] = fmt.Sprint(s.Value[1])
		}
		break
	}
	after := map[string]map[string]float64{}
	for _, p := range probed {
		desc := p.node[2:]
		if p.typ == "hca" {
			desc += " mlx5_0"
		}
		after[p.node] = perfquery(t, s, guidOf[desc], p.name)
	}

	// Every rule of the file, and what treydock would export for it.
	b := readRules(t)
	for _, rule := range b {
		want := map[string]string{} // series key -> value, "" where a range is checked below
		fam, rest, _ := strings.Cut(strings.TrimPrefix(rule, "infiniband_"), "_")
		typ := map[string]string{"switch": "SW", "hca": "CA"}[fam]
		key := func(labels ...string) string {
			m := map[string]string{"__name__": rule}
			for i := 0; i < len(labels); i += 2 {
				m[labels[i]] = labels[i+1]
			}
			return seriesKey(m)
		}
		switch {
		case rest == "info":
			for _, p := range ports {
				if p.typ == typ {
					want[key("guid", p.guid, fam, p.name)] = "1"
				}
			}
		case rule == "infiniband_switch_port_rate_bytes_per_second":
			for _, p := range ports {
				if p.typ == "SW" {
					want[key("guid", p.guid, "port", p.port)] = strconv.FormatFloat(p.rate, 'g', -1, 64)
				}
			}
		case rule == "infiniband_hca_rate_bytes_per_second":
			for _, p := range ports {
				if p.typ == "CA" {
					want[key("guid", p.guid)] = strconv.FormatFloat(p.rate, 'g', -1, 64)
				}
			}
		case strings.HasPrefix(rest, "port_") && treydockPerfquery[strings.TrimPrefix(rest, "port_")].field != "":
			for _, p := range ports {
				if p.typ == typ {
					want[key("guid", p.guid, "port", p.port)] = ""
				}
			}
		default:
			t.Errorf("%s: no check for this rule in TestCompatInfinibandExporterOnIbsim", rule)
			continue
		}
		got := recorded[rule]
		for k, v := range want {
			w, ok := got[k]
			switch {
			case !ok:
				t.Errorf("treydock exports %s; nothing recorded", k)
			case v != "" && !sameFloat(w, v):
				t.Errorf("%s: recorded %s, treydock's tools read %s", k, w, v)
			}
		}
		for k, v := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("recorded %s %s; treydock exports no such series (ibnetdiscover --ports lists no such linked port)", k, v)
			}
		}
		pq, isCounter := treydockPerfquery[strings.TrimPrefix(rest, "port_")]
		if !isCounter || rest == "info" {
			continue
		}
		for _, p := range probed {
			if p.typ != fam {
				continue
			}
			desc := p.node[2:]
			if p.typ == "hca" {
				desc += " mlx5_0"
			}
			k := key("guid", guidOf[desc], "port", p.name)
			lo, okLo := before[p.node][pq.field]
			hi, okHi := after[p.node][pq.field]
			v, err := strconv.ParseFloat(got[k], 64)
			switch {
			case !okLo || !okHi:
				t.Errorf("%s: perfquery printed no %s", k, pq.field)
			case err != nil:
				t.Errorf("%s: recorded %q", k, got[k])
			case v < lo*pq.scale || v > hi*pq.scale:
				t.Errorf("%s: recorded %v, perfquery read %s %v before and %v after (x%v)", k, v, pq.field, lo, hi, pq.scale)
			case set[p.node+"/"+pq.field] != 0 && (lo != hi || float64(set[p.node+"/"+pq.field]) != v):
				t.Errorf("%s: recorded %v; ibsim set %s to %d, perfquery read %v then %v", k, v, pq.field, set[p.node+"/"+pq.field], lo, hi)
			}
		}
	}
}

// readRules lists the names infiniband_exporter.rules.yml records.
func readRules(t *testing.T) []string {
	t.Helper()
	var f struct {
		Groups []struct {
			Rules []struct {
				Record string `yaml:"record"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "alerts", "compat", "infiniband_exporter.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Record)
		}
	}
	if len(out) == 0 || slices.Contains(out, "") {
		t.Fatalf("infiniband_exporter.rules.yml records %v", out)
	}
	return out
}

// sameFloat compares two sample values as numbers (Prometheus prints
// 25000000000 where Go's shortest form is 2.5e+10).
func sameFloat(a, b string) bool {
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	return err1 == nil && err2 == nil && x == y
}
