// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/testenv"
)

// The fabric on the real stack: ibsim (Debian ibsim-utils) simulates a
// small fat tree, the real opensm brings it up, and rdma_doctor's fabric
// collector runs the real iblinkinfo and perfquery (infiniband-diags),
// all attached to the simulator through umad2sim's LD_PRELOAD. Faults are
// set through ibsim's console and read back from /metrics.

// Fat tree of the test: 4 leaves, 2 spines, 16 hosts. Each switch has
// fabricSwitchPorts ports: a leaf's 1-4 go to hosts, 5 to spine1, 6 to
// spine2, 7-8 are unplugged (Down ports from the start); a spine's 1-4 go
// to the leaves' uplinks, 5-8 are unplugged.
const (
	fabricLeaves      = 4
	fabricSpines      = 2
	fabricHostsPer    = 4
	fabricSwitchPorts = 8
)

// fatTree writes the topology in ibnetdiscover's format, as ibsim reads
// it (both ends of each link, node descriptions in the comments).
func fatTree() string {
	var b strings.Builder
	leaf := func(l int) string { return fmt.Sprintf("S-leaf%03d", l) }
	spine := func(s int) string { return fmt.Sprintf("S-spine%d", s) }
	host := func(h int) string { return fmt.Sprintf("H-host%02d", h) }
	for s := 1; s <= fabricSpines; s++ {
		fmt.Fprintf(&b, "Switch\t%d %q\t\t# \"spine%d\" base port 0 lid %d lmc 0\n", fabricSwitchPorts, spine(s), s, s)
		for l := 1; l <= fabricLeaves; l++ {
			fmt.Fprintf(&b, "[%d]\t%q[%d]\t\t# \"leaf%03d\" lid %d 4xHDR\n", l, leaf(l), fabricHostsPer+s, l, fabricSpines+l)
		}
		b.WriteString("\n")
	}
	for l := 1; l <= fabricLeaves; l++ {
		fmt.Fprintf(&b, "Switch\t%d %q\t\t# \"leaf%03d\" base port 0 lid %d lmc 0\n", fabricSwitchPorts, leaf(l), l, fabricSpines+l)
		for p := 1; p <= fabricHostsPer; p++ {
			h := (l-1)*fabricHostsPer + p
			fmt.Fprintf(&b, "[%d]\t%q[1]\t\t# \"host%02d mlx5_0\" lid %d 4xHDR\n", p, host(h), h, 100+h)
		}
		for s := 1; s <= fabricSpines; s++ {
			fmt.Fprintf(&b, "[%d]\t%q[%d]\t\t# \"spine%d\" lid %d 4xHDR\n", fabricHostsPer+s, spine(s), l, s, s)
		}
		b.WriteString("\n")
	}
	for h := 1; h <= fabricLeaves*fabricHostsPer; h++ {
		l, p := (h-1)/fabricHostsPer+1, (h-1)%fabricHostsPer+1
		fmt.Fprintf(&b, "Ca\t1 %q\t\t# \"host%02d mlx5_0\"\n[1]\t%q[%d]\t\t# lid %d lmc 0 \"leaf%03d\" lid %d 4xHDR\n\n", host(h), h, leaf(l), p, 100+h, l, fabricSpines+l)
	}
	return b.String()
}

// umad2sim finds ibsim's client library (Debian libumad2sim0, a
// dependency of ibsim-utils).
func umad2sim(t *testing.T) string {
	t.Helper()
	m, _ := filepath.Glob("/usr/lib/*/umad2sim/libumad2sim.so")
	if len(m) == 0 {
		m, _ = filepath.Glob("/usr/lib*/umad2sim/libumad2sim.so")
	}
	if len(m) == 0 {
		testenv.SkipOrFail(t, "libumad2sim.so not installed (Debian: apt-get install ibsim-utils; .ci/run does)")
	}
	return m[0]
}

// simFabric is a running simulator with its console.
type simFabric struct {
	dir     string
	env     []string // IBSIM_SOCKNAME and LD_PRELOAD, for every client
	console *os.File
	out     *syncBuffer // ibsim's console output
}

// startGroup starts cmd in a process group of its own and kills the whole
// group when the test ends, whatever happened.
func startGroup(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if cmd.Dir == "" {
		// umad2sim writes a fake sysfs (sys-<pid>/) into the working
		// directory of each process it attaches.
		cmd.Dir = t.TempDir()
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", cmd.Path, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
}

// startSimFabric starts ibsim on the fat tree and opensm on it, and
// returns once opensm has logged SUBNET UP.
func startSimFabric(t *testing.T) *simFabric {
	t.Helper()
	ibsim := requireTool(t, "ibsim")
	opensm := requireTool(t, "opensm")
	requireTool(t, "iblinkinfo")
	requireTool(t, "perfquery")
	lib := umad2sim(t)

	dir := t.TempDir()
	netFile := filepath.Join(dir, "fattree.net")
	if err := os.WriteFile(netFile, []byte(fatTree()), 0o644); err != nil {
		t.Fatal(err)
	}
	// A simulator of our own: tests and a developer's ibsim do not meet.
	sock := "IBSIM_SOCKNAME=rdma_doctor-e2e-" + strconv.Itoa(os.Getpid()) + "-" + filepath.Base(dir)
	s := &simFabric{dir: dir, out: &syncBuffer{}, env: append(os.Environ(), sock, "LD_PRELOAD="+lib)}

	// The console reads stdin only, and spins on EOF: it gets a pipe
	// whose write end the test holds until the end.
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wr.Close() })
	sim := exec.Command(ibsim, "-s", netFile)
	sim.Env, sim.Stdin, sim.Stdout, sim.Stderr = append(os.Environ(), sock), rd, s.out, s.out
	startGroup(t, sim)
	rd.Close()
	s.console = wr
	s.waitOut(t, "sim>", 1)

	osmDir := filepath.Join(dir, "opensm")
	if err := os.MkdirAll(osmDir, 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(osmDir, "opensm.log")
	// -d2: without it SUBNET UP never reaches the log.
	osm := exec.Command(opensm, "-d2", "-f", log)
	osm.Env = append(append([]string{}, s.env...), "OSM_CACHE_DIR="+osmDir, "OSM_TMP_DIR="+osmDir)
	osmOut := &syncBuffer{}
	osm.Stdout, osm.Stderr = osmOut, osmOut
	startGroup(t, osm)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		b, _ := os.ReadFile(log)
		if strings.Contains(string(b), "SUBNET UP") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("opensm: no SUBNET UP in 60 s\n%s\n%s\nibsim:\n%s", osmOut.String(), tail(string(b), 2000), tail(s.out.String(), 2000))
		}
	}
	return s
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// waitOut waits until ibsim's output holds want at least n times.
func (s *simFabric) waitOut(t *testing.T, want string, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); strings.Count(s.out.String(), want) < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("ibsim: no %q (x%d) in 30 s:\n%s", want, n, tail(s.out.String(), 2000))
		}
	}
}

// do runs a console command and waits for ibsim's next prompt.
func (s *simFabric) do(t *testing.T, cmd string) {
	t.Helper()
	prompts := strings.Count(s.out.String(), "sim>")
	if _, err := fmt.Fprintln(s.console, cmd); err != nil {
		t.Fatal(err)
	}
	s.waitOut(t, "sim>", prompts+1)
}

// set sets a PMA counter and checks ibsim's echo of the value it kept
// (values clip to the field's width).
func (s *simFabric) set(t *testing.T, node string, port int, field string, v, kept int) {
	t.Helper()
	s.do(t, fmt.Sprintf("PerformanceSet %q[%d] PortCounters.%s=%d", node, port, field, v))
	want := fmt.Sprintf("%s[%d] PortCounters.%s has been set to %d", node, port, field, kept)
	if !strings.Contains(s.out.String(), want) {
		t.Fatalf("ibsim did not echo %q:\n%s", want, tail(s.out.String(), 1000))
	}
}

// serveFabric runs rdma_doctor with only the fabric collector, on short
// intervals, with the simulator's environment (its tool children inherit
// the preload; a static Go binary ignores it itself).
func serveFabric(t *testing.T, s *simFabric, extra ...string) (string, *syncBuffer) {
	t.Helper()
	bin := binary(t)
	for attempt := 0; ; attempt++ {
		addr := freeAddr(t)
		logs := &syncBuffer{}
		args := append(append(hostArgs(t, "sm-opensm"), "--web.listen-address="+addr, "--log.level=debug",
			"--collector.disable-defaults", "--collector.fabric",
			"--collector.fabric.interval=1s", "--collector.fabric.timeout=30s",
			"--collector.fabric.counters-interval=1s", "--collector.fabric.counters-timeout=20s"), extra...)
		cmd := exec.Command(bin, args...)
		cmd.Env, cmd.Stdout, cmd.Stderr = s.env, logs, logs
		startGroup(t, cmd)
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
				c.Close()
				return addr, logs
			}
			if strings.Contains(logs.String(), "address already in use") && attempt < 3 {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("rdma_doctor did not listen:\n%s", logs.String())
			}
		}
	}
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
	t.Fatalf("no %s after 60 s:\n%s\nlog:\n%s", what, smGrep(body, "rdma_fabric_counter_sweep")+smGrep(body, "rdma_fabric_scan"), tail(logs.String(), 3000))
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
	s.set(t, "S-spine1", 2, "PortXmitDiscards", 77, 77)          // a spine port toward leaf002
	s.set(t, "S-leaf002", 5, "LinkDownedCounter", 3, 3)          // leaf002's uplink to spine1
	s.set(t, "S-leaf003", 6, "PortXmitWait", 100000, 100000)     // leaf003's uplink to spine2
	s.do(t, `Unlink "S-leaf004"[4]`)                             // host16's cable pulled

	addr, logs := serveFabric(t, s)
	body := metricsWhen(t, addr, logs, "successful sweep", func(b string) bool {
		v, _ := sample(b, "rdma_fabric_counter_sweep_success")
		return v == 1 && sweeps(b) >= 1
	})
	g := nodeGUIDs(body)
	for _, n := range []string{"leaf001", "leaf002", "leaf003", "leaf004", "spine1", "spine2"} {
		if g[n] == "" {
			t.Fatalf("no rdma_fabric_node_info for %s:\n%s", n, smGrep(body, "rdma_fabric_node_info"))
		}
	}
	switchPorts := (fabricLeaves + fabricSpines) * fabricSwitchPorts
	for _, w := range []struct {
		series string
		want   float64
	}{
		{portSeries("rdma_fabric_port_symbol_errors_total", g["leaf001"], 1), 4200},
		{portSeries("rdma_fabric_port_symbol_errors_total", g["leaf001"], 2), 65535},
		{fmt.Sprintf(`rdma_fabric_port_counter_saturated{counter="symbol_error",guid="%s",port="2"}`, g["leaf001"]), 1},
		{fmt.Sprintf(`rdma_fabric_port_counter_saturated{counter="symbol_error",guid="%s",port="1"}`, g["leaf001"]), 0},
		{portSeries("rdma_fabric_port_transmit_discards_total", g["spine1"], 2), 77},
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
	if v, ok := sample(body, portSeries("rdma_fabric_port_data_received_bytes_total", g["spine1"], 1)); !ok || v <= 0 || int64(v)%4 != 0 {
		t.Errorf("spine1/1 data received %v (present %v), want a positive multiple of 4", v, ok)
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
		{"rdma_fabric_counter_sweep_ports_unknown", fabricSwitchPorts},
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
// exactly once (Prometheus joins them). Concurrency 1 keeps the clients
// (opensm, and per exporter one iblinkinfo and one perfquery) under
// ibsim's 10.
func TestFabricShardsOnIbsim(t *testing.T) {
	switchPorts := (fabricLeaves + fabricSpines) * fabricSwitchPorts
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
		addr, logs := serveFabric(t, s, fmt.Sprintf("--collector.fabric.shard=%d/%d", i, n), "--collector.fabric.concurrency=1")
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
	s.set(t, "H-host03", 1, "PortRcvErrors", 9, 9)
	hosts := fabricLeaves * fabricHostsPer
	for _, ca := range []bool{false, true} {
		args := []string{"--collector.fabric.concurrency=2"}
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
		if cas != hosts || g["host03 mlx5_0"] == "" {
			t.Fatalf("%d CA node infos, want %d:\n%s", cas, hosts, smGrep(body, "rdma_fabric_node_info"))
		}
		if v, ok := sample(body, portSeries("rdma_fabric_port_receive_errors_total", g["host03 mlx5_0"], 1)); !ok || v != 9 {
			t.Errorf("host03 receive errors %v (present %v), want 9", v, ok)
		}
		want := float64((fabricLeaves+fabricSpines)*fabricSwitchPorts + hosts)
		if v, _ := sample(body, "rdma_fabric_counter_sweep_ports"); v != want {
			t.Errorf("swept %v ports, want %v", v, want)
		}
	}
}
