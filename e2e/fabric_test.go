// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
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

	"github.com/rdma-doctor/rdma_doctor/internal/dev/ibsimtest"
	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

// The fabric on the real stack: ibsim (Debian ibsim-utils) simulates a
// small fat tree, the real opensm brings it up, and rdma_doctor's fabric
// collector runs the real iblinkinfo, ibnetdiscover and ibqueryerrors (infiniband-diags),
// all attached to the simulator through umad2sim's LD_PRELOAD. Faults are
// set through ibsim's console and read back from /metrics.

// fabricShape is the test's fat tree: 4 leaves, 2 spines, 16 hosts. Each
// switch has 8 ports: a leaf's 1-4 go to hosts, 5 to spine001, 6 to
// spine002, 7-8 are unplugged (Down ports from the start); a spine's 1-4
// go to the leaves' uplinks, 5-8 are unplugged.
var fabricShape = ibsimtest.Shape{Hosts: 16, Leaves: 4, Spines: 2, LeafPorts: 8, SpinePorts: 8}

// simFabric is the running simulator, with console helpers that fail the
// test.
type simFabric struct{ *ibsimtest.Fabric }

// startSimFabric starts ibsim on the fat tree and opensm on it, returns
// once opensm has logged SUBNET UP, and stops both when the test ends.
func startSimFabric(t *testing.T) simFabric {
	t.Helper()
	for _, tool := range []string{"ibsim", "opensm", "iblinkinfo", "ibnetdiscover", "ibqueryerrors"} {
		requireTool(t, tool)
	}
	if _, err := ibsimtest.Umad2sim(); err != nil {
		testenv.SkipOrFail(t, err.Error()+"; .ci/run installs it")
	}
	dir := t.TempDir()
	netFile := filepath.Join(dir, "fattree.net")
	if err := os.WriteFile(netFile, []byte(fabricShape.NetFile()), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := ibsimtest.Start(dir, netFile, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return simFabric{f}
}

// do runs a console command, waits for ibsim's next prompt and returns
// ibsim's output to it.
func (s simFabric) do(t *testing.T, cmd string) string {
	t.Helper()
	out, err := s.Do(cmd, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// set sets a PMA counter and checks ibsim's echo of the value it kept
// (values clip to the field's width).
func (s simFabric) set(t *testing.T, node string, port int, field string, v, kept int) {
	t.Helper()
	out := s.do(t, fmt.Sprintf("PerformanceSet %q[%d] PortCounters.%s=%d", node, port, field, v))
	want := fmt.Sprintf("%s[%d] PortCounters.%s has been set to %d", node, port, field, kept)
	if !strings.Contains(out, want) {
		t.Fatalf("ibsim did not echo %q:\n%s", want, ibsimtest.Tail(out, 1000))
	}
}

// serveFabric runs rdma_doctor with only the fabric collector, on short
// intervals, with the simulator's environment (its tool children inherit
// the preload; a static Go binary ignores it itself).
func serveFabric(t *testing.T, s simFabric, extra ...string) (string, *syncBuffer) {
	t.Helper()
	return serveFabricOn(t, s, hostArgs(t, "sm-opensm"), "1s", extra...)
}

// serveFabricOn is serveFabric on the host tree that host (hostArgs' flags)
// names, with a counter sweep every sweep (a duration flag value).
func serveFabricOn(t *testing.T, s simFabric, host []string, sweep string, extra ...string) (string, *syncBuffer) {
	t.Helper()
	bin := binary(t)
	for attempt := 0; ; attempt++ {
		addr := freeAddr(t)
		logs := &syncBuffer{}
		args := append(append([]string{}, host...), "--web.listen-address="+addr, "--log.level=debug",
			"--collector.disable-defaults", "--collector.fabric")
		// The short intervals, unless extra sets them (a flag is given once).
		for _, d := range []string{"--collector.fabric.interval=1s", "--collector.fabric.timeout=30s",
			"--collector.fabric.counters-interval=" + sweep, "--collector.fabric.counters-timeout=20s"} {
			name, _, _ := strings.Cut(d, "=")
			if !slices.ContainsFunc(extra, func(e string) bool { return strings.HasPrefix(e, name+"=") }) {
				args = append(args, d)
			}
		}
		args = append(args, extra...)
		cmd := exec.Command(bin, args...)
		cmd.Env, cmd.Stdout, cmd.Stderr = s.Env, logs, logs
		dir := t.TempDir()
		p, err := ibsimtest.StartProc(cmd, dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stopExporter(t, p, dir) })
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
				c.Close()
				return addr, logs
			}
			if strings.Contains(logs.String(), "address already in use") && attempt < 3 {
				_ = p.Stop()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("rdma_doctor did not listen:\n%s", logs.String())
			}
		}
	}
}

// stopExporter kills the exporter's process group, then what it left
// running in dir, its working directory: its tools (iblinkinfo,
// ibqueryerrors) run in process groups of their own, outlive its kill, and
// write umad2sim's fake sysfs into the directory they inherit. Once no
// live process works in dir the test can remove it (30 s at most: the
// bound of a wait, not a timed assertion).
func stopExporter(t *testing.T, p *ibsimtest.Proc, dir string) {
	t.Helper()
	_ = p.Stop()
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		left := workingIn(dir)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes %v still work in %s 30 s after the exporter was killed", left, dir)
			return
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// workingIn lists the live processes whose working directory is dir or
// below it.
func workingIn(dir string) []int {
	return liveProcs(func(proc string) bool {
		cwd, err := os.Readlink(proc + "/cwd")
		return err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/"))
	})
}

// metricsWhen scrapes until ok holds for the body (60 s at most: the
// bound of a wait, not a timed assertion).
func metricsWhen(t *testing.T, addr string, logs *syncBuffer, what string, ok func(body string) bool) string {
	t.Helper()
	var body string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		_, body = smFetch(t, addr, "/metrics", "")
		if ok(body) {
			return body
		}
	}
	t.Fatalf("no %s after 60 s:\n%s\nlog:\n%s", what, smGrep(body, "rdma_fabric_counter_sweep")+smGrep(body, "rdma_fabric_scan"), ibsimtest.Tail(logs.String(), 3000))
	return ""
}

// sample returns the value of the series whose text (name and labels) is
// exactly series; ok is false when it is absent.
func sample(body, series string) (float64, bool) {
	for _, l := range strings.Split(body, "\n") {
		rest, found := strings.CutPrefix(l, series+" ")
		if !found {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		return v, err == nil
	}
	return 0, false
}

// nodeGUIDs maps node descriptions to the guid label, from
// rdma_fabric_node_info.
func nodeGUIDs(body string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(l, "rdma_fabric_node_info{") {
			continue
		}
		g := between(l, `guid="`, `"`)
		n := between(l, `node="`, `"`)
		m[n] = g
	}
	return m
}

func between(s, a, b string) string {
	_, s, _ = strings.Cut(s, a)
	s, _, _ = strings.Cut(s, b)
	return s
}

// portSeries is the text of a per-port series.
func portSeries(name, guid string, port int) string {
	return fmt.Sprintf(`%s{guid="%s",port="%d"}`, name, guid, port)
}

func sweeps(body string) float64 {
	v, _ := sample(body, "rdma_fabric_counter_sweep_runs_total")
	return v
}

// TestFabricCountersOnIbsim is issue 28's end-to-end test of the fabric
// data path on the real stack.
func TestFabricCountersOnIbsim(t *testing.T) {
	s := startSimFabric(t)

	// Faults before rdma_doctor starts: its first sweep must see them.
	s.set(t, "S-leaf001", 1, "SymbolErrorCounter", 4200, 4200)
	s.set(t, "S-leaf001", 2, "SymbolErrorCounter", 70000, 65535) // clips: a saturated 16-bit field
	s.set(t, "S-spine001", 2, "PortXmitDiscards", 77, 77)        // a spine port toward leaf002
	s.set(t, "S-leaf002", 5, "LinkDownedCounter", 3, 3)          // leaf002's uplink to spine001
	s.set(t, "S-leaf003", 6, "PortXmitWait", 100000, 100000)     // leaf003's uplink to spine002
	s.do(t, `Unlink "S-leaf004"[4]`)                             // host0016's cable pulled

	addr, logs := serveFabric(t, s)
	body := metricsWhen(t, addr, logs, "successful sweep", func(b string) bool {
		v, _ := sample(b, "rdma_fabric_counter_sweep_success")
		return v == 1 && sweeps(b) >= 1
	})
	g := nodeGUIDs(body)
	for _, n := range []string{"leaf001", "leaf002", "leaf003", "leaf004", "spine001", "spine002"} {
		if g[n] == "" {
			t.Fatalf("no rdma_fabric_node_info for %s:\n%s", n, smGrep(body, "rdma_fabric_node_info"))
		}
	}
	switchPorts := fabricShape.SwitchPorts()
	for _, w := range []struct {
		series string
		want   float64
	}{
		{portSeries("rdma_fabric_port_symbol_errors_total", g["leaf001"], 1), 4200},
		{portSeries("rdma_fabric_port_symbol_errors_total", g["leaf001"], 2), 65535},
		{fmt.Sprintf(`rdma_fabric_port_counter_saturated{counter="symbol_error",guid="%s",port="2"}`, g["leaf001"]), 1},
		{fmt.Sprintf(`rdma_fabric_port_counter_saturated{counter="symbol_error",guid="%s",port="1"}`, g["leaf001"]), 0},
		{portSeries("rdma_fabric_port_transmit_discards_total", g["spine001"], 2), 77},
		{portSeries("rdma_fabric_port_link_downed_total", g["leaf002"], 5), 3},
		{portSeries("rdma_fabric_port_transmit_wait_total", g["leaf003"], 6), 100000},
		// A clean port reads a real zero.
		{portSeries("rdma_fabric_port_symbol_errors_total", g["leaf003"], 1), 0},
		{portSeries("rdma_fabric_port_transmit_discards_total", g["leaf003"], 1), 0},
		// The unplugged host link and the never-cabled ports: still series,
		// state 1 DOWN; their counters are read too.
		{portSeries("rdma_fabric_port_state", g["leaf004"], 4), 1},
		{portSeries("rdma_fabric_port_state", g["leaf004"], 7), 1},
		{portSeries("rdma_fabric_port_counters_unknown", g["leaf004"], 4), 0},
		{portSeries("rdma_fabric_port_state", g["leaf004"], 3), 4},
		{portSeries("rdma_fabric_port_physical_state", g["leaf004"], 3), 5},
		{"rdma_fabric_counter_sweep_ports", float64(switchPorts)},
		{"rdma_fabric_counter_sweep_ports_unknown", 0},
		{`rdma_fabric_counter_sweep_failures_total{reason="mad_failed"}`, 0},
	} {
		if got, ok := sample(body, w.series); !ok || got != w.want {
			t.Errorf("%s = %v (present %v), want %v", w.series, got, ok, w.want)
		}
	}
	// Data counters: octets (4-octet words x 4), from the 64-bit
	// attribute ibsim advertises; MADs have crossed every linked port.
	if v, ok := sample(body, portSeries("rdma_fabric_port_data_received_bytes_total", g["spine001"], 1)); !ok || v <= 0 || int64(v)%4 != 0 {
		t.Errorf("spine001/1 data received %v (present %v), want a positive multiple of 4", v, ok)
	}
	if n := strings.Count(body, "\nrdma_fabric_port_state{"); n != switchPorts {
		t.Errorf("%d port state series, want every switch port (%d)", n, switchPorts)
	}

	// A new error is seen by the next sweep.
	after := sweeps(body)
	s.set(t, "S-leaf002", 1, "SymbolErrorCounter", 5, 5)
	body = metricsWhen(t, addr, logs, "two more sweeps", func(b string) bool { return sweeps(b) >= after+2 })
	if v, _ := sample(body, portSeries("rdma_fabric_port_symbol_errors_total", g["leaf002"], 1)); v != 5 {
		t.Errorf("leaf002/1 symbol errors %v after the console set 5", v)
	}

	// A switch that stops answering costs only its own series: its ports
	// are unknown and counted, the rest of the sweep goes on.
	s.do(t, `Error "S-leaf004" 100`)
	body = metricsWhen(t, addr, logs, "leaf004 unknown", func(b string) bool {
		v, _ := sample(b, portSeries("rdma_fabric_port_counters_unknown", g["leaf004"], 1))
		return v == 1
	})
	for _, w := range []struct {
		series string
		want   float64
	}{
		{"rdma_fabric_counter_sweep_success", 0},
		{"rdma_fabric_counter_sweep_ports_unknown", float64(fabricShape.LeafPorts)},
		{portSeries("rdma_fabric_port_counters_unknown", g["leaf004"], 8), 1},
		{portSeries("rdma_fabric_port_counters_unknown", g["leaf001"], 1), 0},
		{portSeries("rdma_fabric_port_symbol_errors_total", g["leaf001"], 1), 4200},
		{portSeries("rdma_fabric_port_state", g["leaf004"], 1), 4}, // still a series
	} {
		if got, ok := sample(body, w.series); !ok || got != w.want {
			t.Errorf("leaf004 silent: %s = %v (present %v), want %v", w.series, got, ok, w.want)
		}
	}
	if _, ok := sample(body, portSeries("rdma_fabric_port_symbol_errors_total", g["leaf004"], 1)); ok {
		t.Error("leaf004/1 exports a symbol error count from a sweep that could not read it")
	}
	failed := 0.0
	for _, r := range []string{"mad_failed", "timeout"} {
		v, _ := sample(body, `rdma_fabric_counter_sweep_failures_total{reason="`+r+`"}`)
		failed += v
	}
	if failed == 0 {
		t.Errorf("the silent switch's failed runs are not counted:\n%s", smGrep(body, "rdma_fabric_counter_sweep_failures_total"))
	}
}

// TestFabricShardsOnIbsim: two and then three exporters, each with its
// shard of the switches, cover every switch port of the simulated fabric
// exactly once (Prometheus joins them). Each exporter runs one tool at a
// time in its sweep, so the clients (opensm, and per exporter one
// iblinkinfo and one sweep tool) stay under ibsim's 10.
func TestFabricShardsOnIbsim(t *testing.T) {
	switchPorts := fabricShape.SwitchPorts()
	for _, n := range []int{2, 3} {
		t.Run(strconv.Itoa(n), func(t *testing.T) { fabricShards(t, n, switchPorts) })
	}
}

// fabricShards runs n sharded exporters on a simulator of their own (all
// stopped when the subtest ends).
func fabricShards(t *testing.T, n, switchPorts int) {
	s := startSimFabric(t)
	seen := map[string]int{}
	for i := range n {
		addr, logs := serveFabric(t, s, fmt.Sprintf("--collector.fabric.shard=%d/%d", i, n))
		body := metricsWhen(t, addr, logs, "a successful sweep", func(b string) bool {
			v, _ := sample(b, "rdma_fabric_counter_sweep_success")
			return v == 1
		})
		ports, _ := sample(body, "rdma_fabric_counter_sweep_ports")
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "rdma_fabric_port_state{") || strings.HasPrefix(l, "rdma_fabric_port_counters_unknown{") || strings.HasPrefix(l, "rdma_fabric_port_symbol_errors_total{") {
				name, _, _ := strings.Cut(l, " ")
				seen[name]++
			}
		}
		t.Logf("shard %d/%d: %v ports", i, n, ports)
	}
	if len(seen) != 3*switchPorts {
		t.Errorf("%d shards: %d distinct per-port series, want %d (3 per switch port)", n, len(seen), 3*switchPorts)
	}
	for k, c := range seen {
		if c != 1 {
			t.Errorf("%d shards: %s exported by %d exporters", n, k, c)
		}
	}
}

// TestFabricCACountersOnIbsim: --collector.fabric.ca-counters sweeps the
// hosts' ports too (off by default: hosts export their own side).
func TestFabricCACountersOnIbsim(t *testing.T) {
	s := startSimFabric(t)
	s.set(t, "H-host0003", 1, "PortRcvErrors", 9, 9)
	hosts := fabricShape.Hosts
	for _, ca := range []bool{false, true} {
		var args []string
		if ca {
			args = append(args, "--collector.fabric.ca-counters")
		}
		addr, logs := serveFabric(t, s, args...)
		body := metricsWhen(t, addr, logs, "a successful sweep", func(b string) bool {
			v, _ := sample(b, "rdma_fabric_counter_sweep_success")
			return v == 1
		})
		cas := strings.Count(body, `node_type="ca"`)
		g := nodeGUIDs(body)
		if !ca {
			if cas != 0 {
				t.Errorf("%d CA node infos without --collector.fabric.ca-counters", cas)
			}
			continue
		}
		if cas != hosts || g["host0003 mlx5_0"] == "" {
			t.Fatalf("%d CA node infos, want %d:\n%s", cas, hosts, smGrep(body, "rdma_fabric_node_info"))
		}
		if v, ok := sample(body, portSeries("rdma_fabric_port_receive_errors_total", g["host0003 mlx5_0"], 1)); !ok || v != 9 {
			t.Errorf("host0003 receive errors %v (present %v), want 9", v, ok)
		}
		want := float64(fabricShape.SwitchPorts() + hosts)
		if v, _ := sample(body, "rdma_fabric_counter_sweep_ports"); v != want {
			t.Errorf("swept %v ports, want %v", v, want)
		}
	}
}
