// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest"
)

// Diagnose is the store's read side as the probe checks read it
// (diagnose.ProbeResults): what perftest's tests and error kinds mean is
// decided here, next to the probe, so diagnose imports none of it.
func Diagnose(r Reader) diagnose.ProbeResults { return diagnoseView{r} }

type diagnoseView struct{ r Reader }

// transportFailed are the failures that mean the RDMA path itself broke,
// not that the probe could not be set up.
var transportFailed = map[string]bool{
	string(perftest.RetryExceeded): true, string(perftest.CompletionError): true, string(perftest.PortDown): true,
}

func (v diagnoseView) ProbeSeries() []diagnose.ProbeSeries {
	entries := v.r.Latest()
	out := make([]diagnose.ProbeSeries, 0, len(entries))
	for i := range entries {
		e := &entries[i]
		s := diagnose.ProbeSeries{Device: e.Device, Port: e.Port, Test: e.Test, Peer: e.Peer,
			Bandwidth: perftest.Test(e.Test).Bandwidth(), Last: diagnoseRun(e.Last)}
		if e.LastSuccess != nil {
			s.LastSuccess = e.LastSuccess.Start
		}
		out = append(out, s)
	}
	return out
}

// diagnoseRun is one result as the checks judge it; nil stays nil.
func diagnoseRun(r *Result) *diagnose.ProbeRun {
	if r == nil {
		return nil
	}
	d := &diagnose.ProbeRun{Start: r.Start, Success: r.Success, ErrorKind: r.ErrorKind, Error: r.Error,
		TransportFailed: transportFailed[r.ErrorKind], Mode: string(r.Mode), Loopback: r.Mode == ModeLoopback,
		Size: r.Size, Iterations: r.Iterations, Notes: r.Notes, PortRate: r.PortRate}
	if l := r.Latency; l != nil {
		d.Latency = &diagnose.ProbeLatency{Typical: l.Typical, Min: l.Min, Max: l.Max, P99: l.P99, HasPercentiles: l.HasPercentiles}
	}
	if b := r.Bandwidth; b != nil {
		avg := b.Average
		d.Bandwidth = &avg
	}
	return d
}
