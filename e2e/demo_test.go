// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/dashboards"
	"github.com/rdma-doctor/rdma_doctor/internal/dev/demo"
	"github.com/rdma-doctor/rdma_doctor/internal/dev/ibsimtest"
	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

// TestDemoDashboardQueries runs make demo's setup headless (the built
// binary on demo.Hosts and on the simulated fabric, the real Prometheus
// with the shipped rules, scraping every second) and evaluates every
// dashboard query on it. A query that returns nothing must be listed in
// dashboards/empty_on_demo.txt with the reason, and a listed query must
// still return nothing, so the list stays true.
func TestDemoDashboardQueries(t *testing.T) {
	promBin := requireTool(t, "prometheus")
	for _, tool := range []string{"ibsim", "opensm", "iblinkinfo", "ibnetdiscover", "ibqueryerrors"} {
		requireTool(t, tool)
	}
	if _, err := ibsimtest.Umad2sim(); err != nil {
		testenv.SkipOrFail(t, err.Error()+"; .ci/run installs it")
	}
	listed, err := dashboards.EmptyOnDemo()
	if err != nil {
		t.Fatal(err)
	}
	qs, err := dashboards.Queries()
	if err != nil {
		t.Fatal(err)
	}
	exprs := make([]string, len(qs))
	for i, q := range qs {
		if exprs[i], err = dashboards.Expand(q.Expr); err != nil {
			t.Fatal(err)
		}
	}
	inDashboards := map[dashboards.Query]bool{}
	for _, q := range qs {
		inDashboards[q] = true
	}
	for q := range listed {
		if !inDashboards[q] {
			t.Errorf("empty_on_demo.txt lists a query no dashboard has: %s", dashboards.EmptyLine(q))
		}
	}

	d, err := demo.Start(demo.Options{
		Binary: binary(t), Prometheus: promBin, Root: repoRoot(t), Dir: t.TempDir(),
		Fabric: true, ScrapeInterval: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	if d.FabricErr != nil {
		t.Fatalf("the demo ran without its fabric: %v", d.FabricErr)
	}

	// Evaluate every query until each one the list does not excuse has
	// data (the rate windows and the fabric's first sweeps need some
	// scrapes), 3 minutes at most: the bound of a wait, not a timed
	// assertion. The last round is the one judged.
	var hasData []bool
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(2 * time.Second) {
		hasData = make([]bool, len(qs))
		waiting := 0
		for i, q := range qs {
			var resp struct {
				Status string `json:"status"`
				Error  string `json:"error"`
				Data   struct {
					Result []any `json:"result"`
				} `json:"data"`
			}
			getJSON(t, d.URL+"/api/v1/query?"+url.Values{"query": {exprs[i]}}.Encode(), &resp)
			if resp.Status != "success" {
				t.Fatalf("%s %q: Prometheus rejects %s: %s", q.File, q.Where, exprs[i], resp.Error)
			}
			hasData[i] = len(resp.Data.Result) > 0
			if _, ok := listed[q]; !ok && !hasData[i] {
				waiting++
			}
		}
		if waiting == 0 || time.Now().After(deadline) {
			break
		}
	}

	var unexplained []string
	empty := 0
	for i, q := range qs {
		reason, ok := listed[q]
		switch {
		case !hasData[i] && !ok:
			unexplained = append(unexplained, dashboards.EmptyLine(q))
		case hasData[i] && ok:
			t.Errorf("returns data on the demo now; remove it from dashboards/empty_on_demo.txt (listed: %s):\n%s", reason, dashboards.EmptyLine(q))
		}
		if !hasData[i] {
			empty++
		}
	}
	sort.Strings(unexplained)
	if len(unexplained) > 0 {
		t.Errorf("%d dashboard queries return nothing on the demo without a reason in dashboards/empty_on_demo.txt:\n%s", len(unexplained), strings.Join(unexplained, "\n"))
	}
	t.Logf("%d dashboard queries on the demo (%d targets): %d with data, %d empty", len(qs), len(d.Targets), len(qs)-empty, empty)
}
