// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import "github.com/rdma-doctor/rdma_doctor/internal/names"

// printable returns the report with every string that can carry host text
// (the host name; a finding's target, observation, expectation, evidence,
// remedy; an opensm log line or a device, netdev or node name inside
// them) made printable (names.Printable: control characters shown
// escaped, \x1b). The text, NHC and HTML renderers call it first, once,
// so no check has to: what a terminal shows cannot be retitled or
// cleared by the host. JSON has the exact strings (encoding/json escapes
// control characters, \u001b). The report is copied only when a string
// changes: the sampler's report is shared by concurrent requests.
func printable(r *Report) *Report {
	var out *Report
	cp := func() {
		if out == nil {
			c := *r
			c.Findings = append([]Finding(nil), r.Findings...)
			c.Checks = append([]CheckInfo(nil), r.Checks...)
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
func hostText(f *Finding) [7]*string {
	return [...]*string{&f.Check, &f.Target, &f.Observed, &f.Expected, &f.Evidence, &f.Remedy, &f.Action}
}
