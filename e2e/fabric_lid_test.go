// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/ibsimtest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sm"
)

// tool runs an infiniband-diags tool on the simulator and returns its
// standard output.
func (s simFabric) tool(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(requireTool(t, name), args...)
	cmd.Env, cmd.Dir = s.Env, t.TempDir()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, ibsimtest.Tail(errOut.String(), 1000))
	}
	return out.String()
}

// lids maps each node's GUID to its LID as iblinkinfo prints them.
func (s simFabric) lids(t *testing.T) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, l := range strings.Split(s.tool(t, "iblinkinfo", "--line"), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || !strings.HasPrefix(f[0], "0x") {
			continue
		}
		// GUID "desc" LID port...: the LID is the first field after the
		// quoted description.
		_, rest, ok := strings.Cut(l[len(f[0]):], `"`)
		if ok {
			_, rest, ok = strings.Cut(rest, `"`)
		}
		if !ok {
			continue
		}
		if lf := strings.Fields(rest); len(lf) > 0 {
			m[f[0]] = lf[0]
		}
	}
	return m
}

// smCount is the master SM's activity count.
func (s simFabric) smCount(t *testing.T) uint64 {
	t.Helper()
	info, err := sm.ParseSMInfo([]byte(s.tool(t, "sminfo")))
	if err != nil {
		t.Fatal(err)
	}
	return info.ActivityCount
}

// swapLIDs rewrites opensm's guid2lid so that the nodes a and b trade
// their LIDs ("0x... 0xLID 0xLID" lines).
func swapLIDs(a, b string) func([]byte) []byte {
	return func(g []byte) []byte {
		lines := strings.Split(string(g), "\n")
		ia, ib := -1, -1
		for i, l := range lines {
			switch {
			case strings.HasPrefix(l, a+" "):
				ia = i
			case strings.HasPrefix(l, b+" "):
				ib = i
			}
		}
		if ia < 0 || ib < 0 {
			return g
		}
		la, lb := strings.TrimPrefix(lines[ia], a), strings.TrimPrefix(lines[ib], b)
		lines[ia], lines[ib] = a+lb, b+la
		return []byte(strings.Join(lines, "\n"))
	}
}

// TestFabricLIDRenumberingOnIbsim is issue 35 item 1 on the real stack:
// every switch and host port gets a symbol error count of its own, then
// opensm is restarted with another LMC (the hosts' LIDs move) and a
// guid2lid in which leaf001 and leaf002 trade LIDs, while the exporter
// sweeps every second and scans the topology only every 10 minutes (so
// only the sweep's own check can see the change). No scrape, before,
// during or after, may show a port with a count other than its own: a
// port whose LIDs are not verified is unknown, and once the new SM is up
// the sweeps read every port again under the right GUID.
func TestFabricLIDRenumberingOnIbsim(t *testing.T) {
	requireTool(t, "sminfo")
	s := startSimFabric(t)
	// A master SM that has run for a while has sent many SMPs; a restarted
	// opensm counts from 0 again (that is what the sweep sees). Light
	// sweeps every second make this one's count grow past what the
	// restarted one reaches after its heavy sweep within seconds, as an
	// SM up for days is past it.
	if err := s.RestartSM(nil, "-s", "1"); err != nil {
		t.Fatal(err)
	}

	names := map[string]string{} // node description -> console name
	want := map[string]float64{} // portSeries(symbol errors) -> count
	for l := 1; l <= fabricShape.Leaves; l++ {
		names[fmt.Sprintf("leaf%03d", l)] = fmt.Sprintf("S-leaf%03d", l)
	}
	for sp := 1; sp <= fabricShape.Spines; sp++ {
		names[fmt.Sprintf("spine%03d", sp)] = fmt.Sprintf("S-spine%03d", sp)
	}
	for h := 1; h <= fabricShape.Hosts; h++ {
		names[fmt.Sprintf("host%04d mlx5_0", h)] = fmt.Sprintf("H-host%04d", h)
	}
	// Distinct counts: switch k's port p reads 100k+p, host h 1000+h.
	count := map[string]int{}
	k := 0
	for _, n := range []string{"leaf001", "leaf002", "leaf003", "leaf004", "spine001", "spine002"} {
		k++
		for p := 1; p <= fabricShape.LeafPorts; p++ {
			v := 100*k + p
			s.set(t, names[n], p, "SymbolErrorCounter", v, v)
			count[fmt.Sprintf("%s/%d", n, p)] = v
		}
	}
	for h := 1; h <= fabricShape.Hosts; h++ {
		n := fmt.Sprintf("host%04d mlx5_0", h)
		s.set(t, names[n], 1, "SymbolErrorCounter", 1000+h, 1000+h)
		count[n+"/1"] = 1000 + h
	}

	addr, logs := serveFabric(t, s, "--collector.fabric.ca-counters", "--collector.fabric.interval=10m")
	body := metricsWhen(t, addr, logs, "a successful sweep", func(b string) bool {
		v, _ := sample(b, "rdma_fabric_counter_sweep_success")
		return v == 1
	})
	g := nodeGUIDs(body)
	for key, v := range count {
		n, port, _ := strings.Cut(key, "/")
		if g[n] == "" {
			t.Fatalf("no rdma_fabric_node_info for %s:\n%s", n, smGrep(body, "rdma_fabric_node_info"))
		}
		p, _ := strconv.Atoi(port)
		want[portSeries("rdma_fabric_port_symbol_errors_total", g[n], p)] = float64(v)
	}

	// Scrape all along, counting every value that is not its port's own.
	var (
		mu                           sync.Mutex
		scrapes, known, unknown, bad int
		firstBad                     []string
	)
	check := func(b string) {
		mu.Lock()
		defer mu.Unlock()
		scrapes++
		for _, l := range strings.Split(b, "\n") {
			switch {
			case strings.HasPrefix(l, "rdma_fabric_port_symbol_errors_total{"):
				series, val, _ := strings.Cut(l, " ")
				w, ok := want[series]
				if !ok {
					continue
				}
				known++
				if v, err := strconv.ParseFloat(val, 64); err != nil || v != w {
					bad++
					if len(firstBad) < 10 {
						firstBad = append(firstBad, fmt.Sprintf("%s = %s, its own count is %v", series, val, w))
					}
				}
			case strings.HasPrefix(l, "rdma_fabric_port_counters_unknown{") && strings.HasSuffix(l, " 1"):
				unknown++
			}
		}
	}
	check(body)
	stop, done := make(chan struct{}), make(chan struct{})
	var once sync.Once
	halt := func() { once.Do(func() { close(stop); <-done }) }
	// The verdict on every scrape, also when a wait below gives up.
	defer func() {
		halt()
		mu.Lock()
		defer mu.Unlock()
		t.Logf("%d scrapes: %d port counts read, %d of another port, %d unknown port samples", scrapes, known, bad, unknown)
		if bad > 0 {
			t.Errorf("%d samples showed another port's count as known; first: %s", bad, strings.Join(firstBad, "; "))
		}
	}()
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			_, b := smFetch(t, addr, "/metrics", "")
			check(b)
		}
	}()

	// Let the SM's count grow well past a restarted one's (the bound of
	// a wait, not a timed assertion).
	for deadline := time.Now().Add(120 * time.Second); s.smCount(t) < 1000; time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("opensm's activity count did not reach 1000 in 120 s: %d", s.smCount(t))
		}
	}
	before := s.lids(t)
	leaf1, leaf2 := g["leaf001"], g["leaf002"]
	if err := s.RestartSM(swapLIDs(leaf1, leaf2), "-l", "2"); err != nil {
		t.Fatal(err)
	}
	after := s.lids(t)
	moved := 0
	for guid, lid := range after {
		if before[guid] != lid {
			moved++
		}
	}
	if after[leaf1] != before[leaf2] || after[leaf2] != before[leaf1] {
		t.Fatalf("leaf001 and leaf002 did not trade LIDs: before %s %s, after %s %s", before[leaf1], before[leaf2], after[leaf1], after[leaf2])
	}
	t.Logf("opensm restarted with LMC 2: %d of %d nodes have another LID", moved, len(after))

	// The sweeps read every port again, under the new LIDs, with no new
	// topology scan.
	swept, _ := sample(body, "rdma_fabric_counter_sweep_runs_total")
	_, body = smFetch(t, addr, "/metrics", "")
	at := sweeps(body)
	body = metricsWhen(t, addr, logs, "a successful sweep after the renumbering", func(b string) bool {
		v, _ := sample(b, "rdma_fabric_counter_sweep_success")
		return v == 1 && sweeps(b) >= at+2
	})
	check(body)
	for series, w := range want {
		if v, ok := sample(body, series); !ok || v != w {
			t.Errorf("after the renumbering %s = %v (present %v), want %v", series, v, ok, w)
		}
	}
	changed, _ := sample(body, `rdma_fabric_counter_sweep_failures_total{reason="sm_changed"}`)
	failed, _ := sample(body, `rdma_fabric_counter_sweep_failures_total{reason="mad_failed"}`)
	t.Logf("sweeps %v to %v: failures sm_changed %v, mad_failed %v", swept, sweeps(body), changed, failed)
	if !strings.Contains(logs.String(), "subnet manager changed") && changed == 0 {
		t.Errorf("no sweep saw the SM change:\n%s", ibsimtest.Tail(logs.String(), 3000))
	}
}

// TestFabricCutSwitchOnIbsim is issue 35 item 12 on the real stack: once
// every link of leaf004 is cut, iblinkinfo prints nothing of it and exits
// 0. Its eight ports stay exported (state as last seen), their counters
// unknown and counted, and neither the scan nor the sweep reads as
// successful.
func TestFabricCutSwitchOnIbsim(t *testing.T) {
	s := startSimFabric(t)
	addr, logs := serveFabric(t, s)
	body := metricsWhen(t, addr, logs, "a successful sweep", func(b string) bool {
		v, _ := sample(b, "rdma_fabric_counter_sweep_success")
		return v == 1
	})
	leaf := nodeGUIDs(body)["leaf004"]
	if leaf == "" {
		t.Fatalf("no leaf004:\n%s", smGrep(body, "rdma_fabric_node_info"))
	}
	for p := 1; p <= fabricShape.LeafPorts-2; p++ {
		s.do(t, fmt.Sprintf(`Unlink "S-leaf004"[%d]`, p))
	}
	body = metricsWhen(t, addr, logs, "leaf004 unknown after its links were cut", func(b string) bool {
		scan, _ := sample(b, "rdma_fabric_scan_success")
		v, _ := sample(b, portSeries("rdma_fabric_port_counters_unknown", leaf, 1))
		return scan == 0 && v == 1
	})
	for p := 1; p <= fabricShape.LeafPorts; p++ {
		if v, ok := sample(body, portSeries("rdma_fabric_port_counters_unknown", leaf, p)); !ok || v != 1 {
			t.Errorf("leaf004/%d counters_unknown %v (present %v), want 1", p, v, ok)
		}
		if _, ok := sample(body, portSeries("rdma_fabric_port_state", leaf, p)); !ok {
			t.Errorf("leaf004/%d has no state series: the cut switch vanished", p)
		}
		if _, ok := sample(body, portSeries("rdma_fabric_port_symbol_errors_total", leaf, p)); ok {
			t.Errorf("leaf004/%d exports a symbol error count it could not read", p)
		}
	}
	for _, w := range []struct {
		series string
		ok     func(float64) bool
	}{
		{"rdma_fabric_scan_success", func(v float64) bool { return v == 0 }},
		{"rdma_fabric_scan_failures_total", func(v float64) bool { return v >= 1 }},
		{"rdma_fabric_counter_sweep_success", func(v float64) bool { return v == 0 }},
		{"rdma_fabric_counter_sweep_ports_unknown", func(v float64) bool { return v >= float64(fabricShape.LeafPorts) }},
		{`rdma_fabric_counter_sweep_failures_total{reason="mad_failed"}`, func(v float64) bool { return v >= 1 }},
	} {
		if v, ok := sample(body, w.series); !ok || !w.ok(v) {
			t.Errorf("leaf004 cut: %s = %v (present %v)", w.series, v, ok)
		}
	}
	unknown, _ := sample(body, "rdma_fabric_counter_sweep_ports_unknown")
	t.Logf("leaf004 cut: %v of %v swept ports unknown", unknown, fabricShape.SwitchPorts())
}
