// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/internal/read/names"
)

// printable returns the report with every string that can carry host text
// (the host name; a finding's target, observation, expectation, evidence,
// remedy; an opensm log line or a device, netdev or node name inside
// them) made printable (names.Printable: control characters shown
// escaped, \x1b). The text, NHC and HTML renderers call it first, once,
// so no check has to: what a terminal shows cannot be retitled or
// cleared by the host. JSON has the exact strings (encoding/json escapes
// control characters, \u001b). The report is copied only when a string
// changes: the sampler's report is shared by concurrent requests.
func printable(r *diagnose.Report) *diagnose.Report {
	var out *diagnose.Report
	cp := func() {
		if out == nil {
			c := *r
			c.Findings = append([]diagnose.Finding(nil), r.Findings...)
			c.Checks = append([]diagnose.CheckInfo(nil), r.Checks...)
			c.Faults = append([]diagnose.Fault(nil), r.Faults...)
			out = &c
		}
	}
	if h := names.Printable(r.Host); h != r.Host {
		cp()
		out.Host = h
	}
	for i := range r.Findings {
		for k, s := range hostText(&r.Findings[i]) {
			if p := names.Printable(*s); p != *s {
				cp()
				*hostText(&out.Findings[i])[k] = p
			}
		}
	}
	for i := range r.Faults {
		if f, changed := printableFault(r.Faults[i]); changed {
			cp()
			out.Faults[i] = f
		}
	}
	for i, c := range r.Checks {
		if p := names.Printable(c.Title); p != c.Title {
			cp()
			out.Checks[i].Title = p
		}
	}
	if out == nil {
		return r
	}
	return out
}

// hostText is a finding's strings, each of which can carry host text.
func hostText(f *diagnose.Finding) [7]*string {
	return [...]*string{&f.Check, &f.Target, &f.Observed, &f.Expected, &f.Evidence, &f.Remedy, &f.Action}
}

// printableFault returns the fault with its host text (node descriptions
// from the fabric scan, the host and device names, what was seen) made
// printable, copied when a string changes.
func printableFault(f diagnose.Fault) (diagnose.Fault, bool) {
	changed := false
	fix := func(s *string) {
		if p := names.Printable(*s); p != *s {
			*s, changed = p, true
		}
	}
	f.Ends = append([]diagnose.FaultEnd(nil), f.Ends...)
	f.Findings = append([]diagnose.FindingRef(nil), f.Findings...)
	fix(&f.ID)
	fix(&f.Summary)
	for i := range f.Ends {
		e := &f.Ends[i]
		fix(&e.Node)
		fix(&e.Host)
		fix(&e.Device)
		e.Seen = append([]string(nil), e.Seen...)
		for k := range e.Seen {
			fix(&e.Seen[k])
		}
	}
	for i := range f.Findings {
		fix(&f.Findings[i].Check)
		fix(&f.Findings[i].Target)
	}
	return f, changed
}
