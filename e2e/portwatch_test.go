// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPortFlapBetweenScrapes flips a port of a copied host down and up
// three times while the server runs with a port sampler every 100 ms: the
// sampler counts the transitions, /diagnose fails port.flap for that port
// alone, and rdma_diagnose_status says so.
//
// Each flip waits until the server has counted it, not a fixed time: a
// sleep long enough for "a few sampler rounds" is a guess on a loaded
// machine. The wait scrapes, so the round that sees a flip may be the
// scrape's own; flips between two reads of a port are covered by
// TestPortFlapBetweenScrapesQuiet (link_downed) and internal/read/portwatch.
func TestPortFlapBetweenScrapes(t *testing.T) {
	root := smCopyHost(t, "cx6-hdr-fdr")
	cfg := filepath.Join(t.TempDir(), "rdma_doctor.yml")
	if err := os.WriteFile(cfg, []byte("diagnose:\n  interval: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := start(t, "--path.rootfs="+root, "--config.file="+cfg, "--collector.portwatch.interval=100ms")
	port := filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1")
	set := func(state, phys, to string, n int) {
		t.Helper()
		// In place, as the kernel's attribute changes under an open fd.
		for name, v := range map[string]string{"state": state, "phys_state": phys} {
			if err := os.WriteFile(filepath.Join(port, name), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		portWaitFor(t, e, fmt.Sprintf(`rdma_port_state_transitions_total{device="mlx5_0",port="1",to=%q} %d`, to, n),
			fmt.Sprintf("mlx5_0/1 set to %q: transition %d to %s not counted", state, n, to))
	}
	for i := 1; i <= 3; i++ {
		set("1: DOWN", "2: Polling", "down", i)
		set("4: ACTIVE", "5: LinkUp", "active", i)
	}
	body := portWaitFor(t, e, `rdma_port_state_transitions_total{device="mlx5_0",port="1",to="active"} 3`, "three flaps")
	for _, want := range []string{
		`rdma_port_state_transitions_total{device="mlx5_0",port="1",to="down"} 3`,
		`rdma_port_state_transitions_total{device="mlx5_1",port="1",to="down"} 0`,
	} {
		if !hasSeries(body, want) {
			t.Errorf("missing %s", want)
		}
	}
	// The diagnose sampler (every second here) judges the history.
	body = portWaitFor(t, e, `rdma_diagnose_status{check="port.flap",target="mlx5_0/1"} 2`,
		"port.flap does not fail for the port that flapped three times")
	if !hasSeries(body, `rdma_diagnose_status{check="port.flap",target="mlx5_1/1"} 0`) {
		t.Error("port.flap does not pass for the port that did not flap")
	}
	_, page := e.get(t, "/diagnose?format=json")
	if !strings.Contains(page, `"check": "port.flap"`) || !strings.Contains(page, "went down and came back 3 times") {
		t.Errorf("/diagnose has no port.flap failure with its remedy:\n%.2000s", page)
	}
}

// portWaitFor scrapes e until a line of /metrics starts with want and
// returns that body; after portWait it fails with why, the port and
// diagnose series it saw, and the server's log.
func portWaitFor(t *testing.T, e *exporter, want, why string) string {
	t.Helper()
	var body string
	for deadline := time.Now().Add(portWait); ; time.Sleep(50 * time.Millisecond) {
		_, body = e.get(t, "/metrics")
		if hasSeries(body, want) {
			return body
		}
		if time.Now().After(deadline) {
			break
		}
	}
	t.Fatalf("%s: no %s after %v; saw:\n%s\n%s\nserver log:\n%s", why, want, portWait,
		grepSeries(body, "rdma_port_state_transitions_total"), grepSeries(body, `rdma_diagnose_status{check="port.flap"`), e.stderr.String())
	return ""
}

// portWait bounds portWaitFor: generous, since only a broken server
// reaches it, and a machine shared by many builds is slow.
const portWait = 30 * time.Second

// TestPortFlapBetweenScrapesQuiet is the default server, which reads the
// ports only when asked (a scrape, the diagnose sampler) or told (a link
// notification, none on a copied host): a port whose link went down and
// came back three times between two scrapes, as its link_downed counter
// says, is counted as three cycles, and port.flap fails for it alone.
func TestPortFlapBetweenScrapesQuiet(t *testing.T) {
	root := smCopyHost(t, "cx6-hdr-fdr")
	cfg := filepath.Join(t.TempDir(), "rdma_doctor.yml")
	if err := os.WriteFile(cfg, []byte("diagnose:\n  interval: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := start(t, "--path.rootfs="+root, "--config.file="+cfg)
	counter := filepath.Join(root, "sys/class/infiniband/mlx5_1/ports/1/counters/link_downed")
	b, err := os.ReadFile(counter)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	e.get(t, "/metrics") // a read before the flaps
	// In place, as the kernel's attribute changes under an open fd; the
	// state files do not change: the link is back up by the next scrape.
	if err := os.WriteFile(counter, []byte(strconv.Itoa(n+3)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	body := smWaitFor(t, e.addr, `rdma_port_state_transitions_total{device="mlx5_1",port="1",to="active"} 3`)
	for _, want := range []string{
		`rdma_port_state_transitions_total{device="mlx5_1",port="1",to="down"} 3`,
		`rdma_port_state_transitions_total{device="mlx5_0",port="1",to="down"} 0`,
	} {
		if !hasSeries(body, want) {
			t.Errorf("missing %s", want)
		}
	}
	smWaitFor(t, e.addr, `rdma_diagnose_status{check="port.flap",target="mlx5_1/1"} 2`)
	_, page := e.get(t, "/diagnose?format=json")
	if !strings.Contains(page, "3 of the cycles between two reads told by link_downed") {
		t.Errorf("/diagnose does not say the cycles came from link_downed:\n%.2000s", page)
	}
}

// TestPortSamplerHungStateRead: the state read of mlx5_0's port hangs in
// the "driver" (tools/slowfs blocks it) while mlx5_1's port flaps five
// times: every flap is counted, and mlx5_0's read counts as stuck. Before,
// the sampler read the ports one after the other and the hung read
// stopped them all.
func TestPortSamplerHungStateRead(t *testing.T) {
	root := smCopyHost(t, "cx6-hdr-fdr")
	dev, err := filepath.EvalSymlinks(filepath.Join(root, "sys/class/infiniband/mlx5_0"))
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(root, filepath.Join(dev, "ports/1/state"))
	if err != nil {
		t.Fatal(err)
	}
	mnt, _ := slowfsMountTree(t, root, rel)
	cfg := filepath.Join(t.TempDir(), "rdma_doctor.yml")
	if err := os.WriteFile(cfg, []byte("diagnose:\n  interval: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := start(t, "--path.rootfs="+mnt, "--config.file="+cfg, "--collector.portwatch.interval=100ms",
		"--scrape.timeout=2s", "--collector.sm.sminfo-path=/nonexistent/sminfo")
	// Written below slowfs, which reads the tree on every read.
	port := filepath.Join(root, "sys/class/infiniband/mlx5_1/ports/1")
	set := func(state, phys string) {
		t.Helper()
		for name, v := range map[string]string{"state": state, "phys_state": phys} {
			if err := os.WriteFile(filepath.Join(port, name), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(400 * time.Millisecond) // a few sampler rounds
	}
	const flaps = 5
	for i := 0; i < flaps; i++ {
		set("1: DOWN", "2: Polling")
		set("4: ACTIVE", "5: LinkUp")
	}
	body := smWaitFor(t, e.addr, `rdma_port_state_transitions_total{device="mlx5_1",port="1",to="active"} `+strconv.Itoa(flaps))
	if !hasSeries(body, `rdma_port_state_transitions_total{device="mlx5_1",port="1",to="down"} `+strconv.Itoa(flaps)) {
		t.Errorf("mlx5_1's downs not all counted:\n%s", grepSeries(body, "rdma_port_state_transitions_total"))
	}
	if hasSeries(body, `rdma_port_state_transitions_total{device="mlx5_0"`) {
		t.Error("mlx5_0, whose state read never returned, has transitions")
	}
	// The sampler's read and the scrapes' own read of the file (the
	// infiniband collector) may both be in flight: one or more.
	if !hasSeries(body, "rdma_host_reads_stuck ") || hasSeries(body, "rdma_host_reads_stuck 0") {
		t.Errorf("the hung state read is not counted stuck:\n%s", grepSeries(body, "rdma_host_reads"))
	}
}

// grepSeries is body's lines that start with prefix.
func grepSeries(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
