// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rdma-doctor/rdma_doctor/alerts"
	"github.com/rdma-doctor/rdma_doctor/dashboards"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
)

// daemon is a peer server (Prometheus, Alertmanager) run for one test: in
// its own process group, killed with the group when the test ends.
type daemon struct {
	name   string
	addr   string
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan error
}

// startDaemon runs bin with args (the literal ADDR in an argument becomes a
// free loopback address) and waits until it answers HTTP on path.
func startDaemon(t *testing.T, name, bin, path string, args ...string) *daemon {
	t.Helper()
	for attempt := 0; ; attempt++ {
		d := &daemon{name: name, addr: freeAddr(t), out: &syncBuffer{}, exited: make(chan error, 1)}
		a := make([]string, len(args))
		for i, s := range args {
			a[i] = strings.ReplaceAll(s, "ADDR", d.addr)
		}
		d.cmd = exec.Command(bin, a...)
		d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
		d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := d.cmd.Start(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		go func() { d.exited <- d.cmd.Wait() }()
		t.Cleanup(d.stop)
		err := d.waitReady(path, 60*time.Second)
		if err == nil {
			return d
		}
		d.stop()
		if attempt < 3 && strings.Contains(d.out.String(), "address already in use") {
			continue
		}
		t.Fatalf("%s: %v\n%s", name, err, d.out.String())
	}
}

// startPrometheus runs Prometheus from bin in dir with the alert rules
// at test intervals (quickRules), scraping targets every second and, with
// alertmanager not empty, sending alerts there; args are more flags.
func startPrometheus(t *testing.T, bin, dir, alertmanager string, targets []string, args ...string) *daemon {
	t.Helper()
	rules := filepath.Join(dir, "rules.yml")
	writeFile(t, rules, string(quickRules(t)))
	alerting := ""
	if alertmanager != "" {
		alerting = fmt.Sprintf("alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: [%q]\n", alertmanager)
	}
	quoted := make([]string, len(targets))
	for i, target := range targets {
		quoted[i] = strconv.Quote(target)
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	writeFile(t, cfg, fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
%sscrape_configs:
  - job_name: rdma_doctor
    static_configs:
      - targets: [%s]
`, rules, alerting, strings.Join(quoted, ", ")))
	return startDaemon(t, "prometheus", bin, "/-/ready", append([]string{
		"--config.file=" + cfg,
		"--storage.tsdb.path=" + filepath.Join(dir, "prom-data"),
		"--web.listen-address=ADDR",
	}, args...)...)
}

func (d *daemon) waitReady(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case err := <-d.exited:
			d.exited <- err
			return fmt.Errorf("exited: %v", err)
		default:
		}
		resp, err := http.Get("http://" + d.addr + path)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("not ready on %s%s after %v", d.addr, path, timeout)
}

// stop kills the process group and reaps the process; it is idempotent.
func (d *daemon) stop() {
	if d.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case err := <-d.exited:
		d.exited <- err
	case <-time.After(10 * time.Second):
	}
}

// getJSON fetches an HTTP API answer into v, bounded in time.
func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v\n%s", u, err, b)
	}
}

// quickRules is the shipped rules file with every `for:` removed, so an
// alert fires on its first evaluation instead of after minutes. Everything
// else (expressions, windows, thresholds, labels, annotations) is the
// shipped text; the `for:` durations themselves are covered by the promtool
// tests in alerts/tests.
func quickRules(t *testing.T) []byte {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal(alerts.Rules, &doc); err != nil {
		t.Fatal(err)
	}
	var strip func(n *yaml.Node)
	removed := 0
	strip = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == "for" {
					n.Content = append(n.Content[:i], n.Content[i+2:]...)
					removed++
					i -= 2
				}
			}
		}
		for _, c := range n.Content {
			strip(c)
		}
	}
	strip(&doc)
	if removed == 0 {
		t.Fatal("no for: in the rules file; quickRules is out of date")
	}
	b, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type amAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Status      struct {
		State       string   `json:"state"`
		InhibitedBy []string `json:"inhibitedBy"`
	} `json:"status"`
}

// waitAlert polls Alertmanager's v2 API until an active alert with the name
// and labels arrives, or fails after timeout.
func waitAlert(t *testing.T, am, prom *daemon, name string, labels map[string]string, timeout time.Duration) amAlert {
	t.Helper()
	filter := []string{fmt.Sprintf("alertname=%q", name)}
	for k, v := range labels {
		filter = append(filter, fmt.Sprintf("%s=%q", k, v))
	}
	q := url.Values{"filter": filter, "active": {"true"}}
	u := "http://" + am.addr + "/api/v2/alerts?" + q.Encode()
	deadline := time.Now().Add(timeout)
	for {
		var got []amAlert
		getJSON(t, u, &got)
		// Match the labels here too: the test must not depend on the
		// server honouring the filter.
		for _, a := range got {
			ok := a.Labels["alertname"] == name
			for k, v := range labels {
				ok = ok && a.Labels[k] == v
			}
			if ok {
				return a
			}
		}
		if time.Now().After(deadline) {
			var firing any
			getJSON(t, "http://"+prom.addr+"/api/v1/alerts", &firing)
			t.Fatalf("alert %s%v did not reach Alertmanager within %v; Prometheus alerts: %v\nPrometheus log:\n%s\nAlertmanager log:\n%s",
				name, labels, timeout, firing, prom.out.String(), am.out.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitState polls Alertmanager until the alert with the name and labels is
// there in the wanted state ("suppressed": muted by an inhibit rule, or
// "active"), or fails after timeout. Alertmanager computes the state on
// each API call from the alerts it holds, so once an inhibiting alert has
// arrived the answer does not change.
func waitState(t *testing.T, am, prom *daemon, name string, labels map[string]string, state string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		a := waitAlert(t, am, prom, name, labels, timeout)
		if a.Status.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("alert %s%v is %s (inhibited by %v), want %s\nAlertmanager log:\n%s",
				name, labels, a.Status.State, a.Status.InhibitedBy, state, am.out.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// amNames lists the alert names Alertmanager holds.
func amNames(t *testing.T, am *daemon) map[string]bool {
	var got []amAlert
	getJSON(t, "http://"+am.addr+"/api/v2/alerts", &got)
	names := map[string]bool{}
	for _, a := range got {
		names[a.Labels["alertname"]] = true
	}
	return names
}

// TestAlertsReachAlertmanager is the real pipeline: the built rdma_doctor on
// a copy of fixture host cx6-hdr-fdr (HDR adapters, one linked at FDR: the
// guide's switch port case) and on sm-no-sm (an NDR port stuck in INIT
// without a subnet manager), a real Prometheus scraping both with the
// shipped rules, a real Alertmanager receiving, with the shipped inhibit
// rules merged into its config. The downgrade alert must arrive, and the
// inhibit rules must mute exactly the overlapping alerts; then a retransmit
// counter rises in the copied tree and the retransmit alert must arrive
// too. Finally every dashboard query runs on this Prometheus without error.
func TestAlertsReachAlertmanager(t *testing.T) {
	promBin := requireTool(t, "prometheus")
	amBin := requireTool(t, "prometheus-alertmanager")

	dir := t.TempDir()
	root := filepath.Join(dir, "host")
	hostfstest.CopyTree(t, filepath.Join(repoRoot(t), "fixtures", "hosts", "cx6-hdr-fdr"), root)
	exp := start(t, "--path.rootfs="+root, "--config.file="+filepath.Join(root, "etc", "rdma_doctor", "rdma_doctor.yml"))
	noSM := start(t, hostArgs(t, "sm-no-sm")...)

	// Alertmanager: one receiver that sends nothing; the API shows what
	// arrived. The shipped inhibit rules appended, as docs/monitoring.md
	// tells users to merge them. Clustering off (it would bind a fixed
	// port).
	amCfg := filepath.Join(dir, "alertmanager.yml")
	writeFile(t, amCfg, `route:
  receiver: "null"
  group_by: [alertname, instance, device, port]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: "null"
`+string(alerts.Inhibit))
	am := startDaemon(t, "alertmanager", amBin, "/-/ready",
		"--config.file="+amCfg,
		"--storage.path="+filepath.Join(dir, "am-data"),
		"--web.listen-address=ADDR",
		"--cluster.listen-address=",
	)

	prom := startPrometheus(t, promBin, dir, am.addr, []string{exp.addr, noSM.addr}, "--rules.alert.resend-delay=1s")

	// The downgrade: mlx5_0 runs FDR (4X, 56 Gb/s) where the config expects
	// 200 Gb/s.
	a := waitAlert(t, am, prom, "RdmaPortLinkDegraded", map[string]string{"device": "mlx5_0", "port": "1", "job": "rdma_doctor"}, 2*time.Minute)
	if a.Labels["severity"] != "critical" || !strings.HasSuffix(a.Annotations["runbook_url"], "#rdmaportlinkdegraded") {
		t.Errorf("RdmaPortLinkDegraded arrived as %+v", a)
	}
	t.Run("inhibit rules", func(t *testing.T) {
		// cx6-hdr-fdr: both ports run below their expected rate, so the
		// diagnose check port.rate fails for both; each is muted by its
		// own port's RdmaPortLinkDegraded. mem.memlock (slurmd's 64 KiB)
		// fails too and nothing mutes it.
		for _, dev := range []string{"mlx5_0", "mlx5_1"} {
			waitState(t, am, prom, "RdmaDiagnoseCheckFailing", map[string]string{"instance": exp.addr, "check": "port.rate", "device": dev, "port": "1"}, "suppressed", 2*time.Minute)
			waitState(t, am, prom, "RdmaPortLinkDegraded", map[string]string{"instance": exp.addr, "device": dev, "port": "1"}, "active", 2*time.Minute)
		}
		// sm-no-sm: the port in INIT without SM fires RdmaPortNotActive,
		// RdmaPortNoSubnetManager and the sm.present check; only the
		// missing SM, the cause, stays: one subnet_manager fault page
		// (issue 36), which mutes the per-port SM alerts.
		waitState(t, am, prom, "RdmaSubnetManagerFault", map[string]string{"counter": "ports_without_sm", "fault_class": "subnet_manager"}, "active", 2*time.Minute)
		waitState(t, am, prom, "RdmaPortNotActive", map[string]string{"instance": noSM.addr, "device": "mlx5_0", "port": "1"}, "suppressed", 2*time.Minute)
		waitState(t, am, prom, "RdmaDiagnoseCheckFailing", map[string]string{"instance": noSM.addr, "check": "sm.present", "device": "mlx5_0", "port": "1"}, "suppressed", 2*time.Minute)
		waitState(t, am, prom, "RdmaPortNoSubnetManager", map[string]string{"instance": noSM.addr, "device": "mlx5_0", "port": "1"}, "suppressed", 2*time.Minute)
		// Every inhibiting alert is in Alertmanager by now, so an alert
		// they must not mute is active for good.
		waitState(t, am, prom, "RdmaDiagnoseCheckFailing", map[string]string{"instance": exp.addr, "check": "mem.memlock"}, "active", 2*time.Minute)
	})

	// Its counters are flat so far: no retransmit alert.
	if amNames(t, am)["RdmaPortRetransmits"] {
		t.Fatal("RdmaPortRetransmits fired before any retransmit counter rose")
	}

	// Raise a retransmit hw_counter, as a lossy path would.
	counter := filepath.Join(root, "sys", "class", "infiniband", "mlx5_0", "ports", "1", "hw_counters", "out_of_sequence")
	b, err := os.ReadFile(counter)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, counter, strconv.FormatUint(v+1_000_000, 10)+"\n")
	a = waitAlert(t, am, prom, "RdmaPortRetransmits", map[string]string{"device": "mlx5_0", "port": "1"}, 2*time.Minute)
	if a.Labels["severity"] != "warning" || a.Annotations["summary"] == "" {
		t.Errorf("RdmaPortRetransmits arrived as %+v", a)
	}
	// mlx5_1's counters did not move.
	var other []amAlert
	getJSON(t, "http://"+am.addr+"/api/v2/alerts?"+url.Values{"filter": {`alertname="RdmaPortRetransmits"`, `device="mlx5_1"`}}.Encode(), &other)
	if len(other) > 0 {
		t.Errorf("RdmaPortRetransmits fired for mlx5_1, whose counters did not move")
	}

	var names []string
	for n := range amNames(t, am) {
		names = append(names, n)
	}
	sort.Strings(names)
	t.Logf("alerts in Alertmanager for cx6-hdr-fdr and sm-no-sm: %v", names)

	t.Run("dashboard queries run", func(t *testing.T) {
		runDashboardQueries(t, prom)
	})
}

// runDashboardQueries runs every dashboard query (variables expanded) on
// the real Prometheus: each must be accepted and evaluate without error.
// Queries that return no data are listed: most name metrics of collectors
// this fixture host does not exercise.
func runDashboardQueries(t *testing.T, prom *daemon) {
	qs, err := dashboards.Queries()
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) == 0 {
		t.Fatal("no dashboard queries")
	}
	empty := 0
	for _, q := range qs {
		expr, err := dashboards.Expand(q.Expr)
		if err != nil {
			t.Errorf("%s %q: %v", q.File, q.Where, err)
			continue
		}
		var resp struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Data   struct {
				Result []json.RawMessage `json:"result"`
			} `json:"data"`
		}
		getJSON(t, "http://"+prom.addr+"/api/v1/query?"+url.Values{"query": {expr}}.Encode(), &resp)
		if resp.Status != "success" {
			t.Errorf("%s %q: Prometheus rejects %s: %s", q.File, q.Where, expr, resp.Error)
			continue
		}
		if len(resp.Data.Result) == 0 {
			empty++
			t.Logf("no data on this host: %s %q", q.File, q.Where)
		}
	}
	t.Logf("%d dashboard queries ran, %d returned no data on cx6-hdr-fdr", len(qs), empty)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
