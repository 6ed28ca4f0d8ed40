// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

// TestEvaluatorNeverCrashes: a check that panics, errors, returns nothing,
// or needs data that is missing becomes a skip finding saying why; the
// checks after it still run.
func TestEvaluatorNeverCrashes(t *testing.T) {
	pass := func(*diagnose.Reading, *diagnose.History, *config.Config) ([]diagnose.Finding, error) {
		return []diagnose.Finding{{Severity: diagnose.Pass, Target: "x"}}, nil
	}
	checks := []*diagnose.Check{
		{ID: "t.panic", Run: func(*diagnose.Reading, *diagnose.History, *config.Config) ([]diagnose.Finding, error) {
			var p *infiniband.Port
			_ = p.Num // nil dereference
			return nil, nil
		}},
		{ID: "t.error", Run: func(*diagnose.Reading, *diagnose.History, *config.Config) ([]diagnose.Finding, error) {
			return []diagnose.Finding{{Severity: diagnose.Warn, Target: "y"}}, errors.New("boom")
		}},
		{ID: "t.empty", Run: func(*diagnose.Reading, *diagnose.History, *config.Config) ([]diagnose.Finding, error) {
			return nil, nil
		}},
		{ID: "t.pending", Pending: "no collector reads X yet"},
		{ID: "t.nodata", Reads: []diagnose.Source{diagnose.SourceInfiniband}, Run: pass},
		{ID: "t.noirq", Reads: []diagnose.Source{diagnose.SourceIRQ}, Run: pass},
		{ID: "t.defaults", Run: func(*diagnose.Reading, *diagnose.History, *config.Config) ([]diagnose.Finding, error) {
			return []diagnose.Finding{{Check: "wrong"}}, nil
		}},
		{ID: "t.ok", Run: pass},
	}
	e, err := diagnose.NewEvaluator(nil, nil, checks)
	if err != nil {
		t.Fatal(err)
	}
	r := e.Evaluate(&diagnose.Reading{Host: &diagnosetest.Host{ClassErr: infiniband.ErrNoClass}}, nil)
	got := map[string][]diagnose.Finding{}
	for _, f := range r.Findings {
		got[f.Check] = append(got[f.Check], f)
	}
	want := []struct {
		id       string
		sev      diagnose.Severity
		evidence string
	}{
		{"t.panic", diagnose.Skip, "check failed: panic: runtime error: invalid memory address"},
		{"t.error", diagnose.Skip, "check failed: boom"},
		{"t.empty", diagnose.Skip, "nothing to judge"},
		{"t.pending", diagnose.Skip, "no collector reads X yet"},
		{"t.nodata", diagnose.Skip, "no RDMA devices"},
		{"t.noirq", diagnose.Skip, "PCI functions and IRQs were not read"},
		{"t.defaults", diagnose.Skip, ""},
		{"t.ok", diagnose.Pass, ""},
	}
	for _, w := range want {
		fs := got[w.id]
		if len(fs) == 0 {
			t.Errorf("%s: no finding", w.id)
			continue
		}
		last := fs[len(fs)-1]
		if last.Severity != w.sev || !strings.Contains(last.Evidence, w.evidence) || last.Target == "" {
			t.Errorf("%s: got %+v, want %s with evidence %q", w.id, last, w.sev, w.evidence)
		}
	}
	if len(got["t.error"]) != 2 || got["t.error"][0].Severity != diagnose.Warn {
		t.Errorf("an erroring check keeps its findings and adds the error: %+v", got["t.error"])
	}
	if len(got["wrong"]) != 0 {
		t.Error("a check cannot report under another id")
	}
	// The status is the worst severity: the warn t.error kept.
	if r.Status != diagnose.Warn || r.Summary.Pass != 1 || r.Summary.Warn != 1 || r.Summary.Skip != 7 || r.Version != diagnose.SchemaVersion {
		t.Errorf("status %s summary %+v", r.Status, r.Summary)
	}
	if len(r.Checks) != len(checks) || r.Checks[0].Status != diagnose.Skip || r.Checks[len(checks)-1].Status != diagnose.Pass {
		t.Errorf("checks %+v", r.Checks)
	}
}

func TestEvaluatorSelection(t *testing.T) {
	checks := []*diagnose.Check{{ID: "a.one", Pending: "p"}, {ID: "a.two", Pending: "p"}, {ID: "b.one", Pending: "p"}}
	ids := func(e *diagnose.Evaluator) string {
		var s []string
		for _, c := range e.Checks() {
			s = append(s, c.ID)
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		cfg  string
		only []string
		want string
		err  string
	}{
		{"", nil, "a.one,a.two,b.one", ""},
		{"", []string{"a.*"}, "a.one,a.two", ""},
		{"", []string{"b.one", "a.two"}, "a.two,b.one", ""},
		{"diagnose:\n  disable: [a.two]\n", nil, "a.one,b.one", ""},
		{"diagnose:\n  disable: [\"a.*\"]\n", []string{"a.one", "b.one"}, "b.one", ""},
		{"diagnose:\n  disable: [c.one]\n", nil, "", "line 2"},
		{"", []string{"c.*"}, "", "matches no check"},
		{"", []string{"a.["}, "", "syntax error"},
	} {
		e, err := diagnose.NewEvaluator(diagnosetest.MustParse(t, tc.cfg), tc.only, checks)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q %v: err %v, want %q", tc.cfg, tc.only, err, tc.err)
			}
			continue
		}
		if err != nil || ids(e) != tc.want {
			t.Errorf("%q %v: %v %v, want %s", tc.cfg, tc.only, ids(e), err, tc.want)
		}
	}
}
