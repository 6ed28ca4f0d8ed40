// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package link

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/kmsg"
)

// KmsgChecks registers the checks of kmsg.go; checks.All lists every concern's.
func KmsgChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{
		ID:    "kernel.events",
		Title: "No RDMA driver trouble in the kernel log",
		Reads: []diagnose.Source{diagnose.SourceKmsg},
		Doc: "The server's kernel log reader (/dev/kmsg, needs CAP_SYSLOG where kernel.dmesg_restrict=1) matches the RDMA drivers' " +
			"messages that mean trouble (firmware fatal errors and health failures, command timeouts, command-interface stalls the driver recovered from (warnings), refused register accesses, " +
			"PCIe power, ASIC and module temperature, pulled modules, transmit timeouts, link downs, PCIe AER errors) of the mlx5, mlx4, " +
			"bnxt_en/bnxt_re, ice, hns3 and cxgb4 drivers and the PCIe core, and maps each to " +
			"its device by PCI address or netdev. A fatal event within diagnose.window (default 10m) fails, any other event in " +
			"the window warns; older ones pass with the last one shown. Messages already in the ring buffer when rdma_doctor " +
			"started are dated from the boot time. Target host collects messages that name no RDMA device.",
		Remedy: "Follow the event's remedy in the finding (docs/runbook.md#rdmakernelfatalevent lists them all); the last message is in the evidence.",
		Run:    checkKernelEvents,
	})
}

// maxKernelEvidence bounds the events a finding's evidence quotes.
const maxKernelEvidence = 3

func checkKernelEvents(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	window := cfg.Diagnose.HistoryWindow()
	byTarget := map[string][]host.KernelEvent{}
	pciOf := map[string]string{}
	if s.IB() != nil {
		for _, d := range s.IB().Devices {
			byTarget[d.Name] = nil
			pciOf[d.Name] = d.PCIAddress
		}
	}
	l, _ := s.KernelLog()
	for _, e := range l.Events {
		t := e.Device
		if t == "" {
			t = "host"
		}
		byTarget[t] = append(byTarget[t], e)
	}
	targets := make([]string, 0, len(byTarget))
	for t := range byTarget {
		targets = append(targets, t)
	}
	sort.Strings(targets)
	var out []diagnose.Finding
	for _, t := range targets {
		out = append(out, kernelFinding(t, byTarget[t], s.Time, window, pciOf[t]))
	}
	if len(out) == 0 {
		return kit.NoTargets("no RDMA devices and no RDMA driver messages in the kernel log"), nil
	}
	return out, nil
}

func kernelFinding(target string, evs []host.KernelEvent, now time.Time, window time.Duration, pci string) diagnose.Finding {
	f := diagnose.Finding{Target: target, Severity: diagnose.Pass,
		Expected: fmt.Sprintf("no fatal RDMA driver event within %v", window),
		Observed: "no RDMA driver trouble logged since rdma_doctor started"}
	if len(evs) == 0 {
		f.Evidence = "kernel log reader: no matching message for " + target
		return f
	}
	type judged struct {
		e      host.KernelEvent
		recent bool
	}
	var js []judged
	var worst *host.KernelEvent
	for i := range evs {
		e := evs[i]
		last := e.Last.Last
		recent := e.HasLast && !last.IsZero() && now.Sub(last) <= window || !e.HasLast && e.Live > 0
		js = append(js, judged{e, recent})
		if !recent {
			continue
		}
		sev := diagnose.Warn
		if e.Event.Severity == kmsg.Fatal {
			sev = diagnose.Fail
		}
		if sev.Worse(f.Severity) {
			f.Severity, worst = sev, &evs[i]
		}
	}
	// Recent first, then by severity as the table orders them.
	sort.SliceStable(js, func(i, j int) bool { return js[i].recent && !js[j].recent })
	var obs, ev []string
	for i, j := range js {
		e := j.e
		n := e.Live + e.History
		when := "undated"
		if e.HasLast && !e.Last.Last.IsZero() {
			when = e.Last.Last.UTC().Format(time.RFC3339)
		}
		where := "since rdma_doctor started"
		if e.Live == 0 {
			where = "before rdma_doctor started"
		}
		obs = append(obs, fmt.Sprintf("%s (%s) %d time(s) %s, last %s", e.Event.Name, e.Event.Severity, n, where, when))
		if i < maxKernelEvidence && e.HasLast {
			ev = append(ev, fmt.Sprintf("%s: %q", e.Event.Name, e.Last.Message))
		}
	}
	f.Observed = strings.Join(obs, "; ")
	f.Evidence = "kernel log (/dev/kmsg): " + strings.Join(ev, "; ")
	if len(js) > maxKernelEvidence {
		f.Evidence += fmt.Sprintf("; and %d more event(s)", len(js)-maxKernelEvidence)
	}
	if worst != nil {
		remedy := kmsg.RemedyFor(worst.Event, worst.Family)
		if pci != "" {
			remedy = strings.ReplaceAll(remedy, "<pci>", pci)
		}
		f.Remedy = fmt.Sprintf("%s logged %s: %s %s", target, worst.Event.Name, worst.Event.Meaning, remedy)
	}
	return f
}
