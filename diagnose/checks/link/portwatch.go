// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package link

import (
	"fmt"
	"strconv"
	"time"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/portwatch"
)

// PortWatchChecks registers the checks of portwatch.go; checks.All lists every concern's.
func PortWatchChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{
		ID:    "port.flap",
		Title: "Port not flapping",
		Reads: []diagnose.Source{diagnose.SourcePortWatch},
		Doc: "The server's port state sampler counts the times a port left ACTIVE and came back: it reads the ports at each " +
			"scrape and diagnose sample, at each link notification of the live kernel (RoCE and IPoIB ports), every " +
			"--collector.portwatch.interval when set, and counts the rises of link_downed between two reads as cycles " +
			"(InfiniBand ports, until the 8-bit counter saturates at 255). diagnose.thresholds.links.flap_cycles (default 3) " +
			"such cycles within flap_window (default 10m) fail: a flapping link drops RDMA connections and stalls " +
			"collectives, and a scrape every 15 s alone misses most of it. Fewer cycles pass with the count in the finding.",
		Remedy: "Reseat or replace the cable and transceiver, check the peer switch port's error counters; mlxlink -d <pci> -p <port> " +
			"-c shows the physical counters and the Troubleshooting Info, and the kernel log the link down/up messages.",
		Run: checkPortFlap,
	})
	l.Register(&diagnose.Check{
		ID:    "port.drop",
		Title: "Port not dropped",
		Reads: []diagnose.Source{diagnose.SourcePortWatch},
		Doc: "A port the sampler saw ACTIVE and that has been down for diagnose.thresholds.links.drop_after (default 4m) " +
			"or longer dropped: not a short bounce that recovers, a link to repair. A port that never came up since " +
			"rdma_doctor started skips (see port.state for spare ports).",
		Remedy: "Fix the physical link (port.phys): cable, transceiver, the peer switch port; then check the SM (port.state).",
		Run:    checkPortDrop,
	})
}

func watchedTarget(h portwatch.History) string { return h.Device + "/" + strconv.Itoa(h.Port) }

func watchEvidence(h portwatch.History) string {
	e := fmt.Sprintf("port sampler: /sys/class/infiniband/%s/ports/%d/state, %d transition(s) since start",
		h.Device, h.Port, sumTransitions(h))
	if h.Inferred > 0 {
		e += fmt.Sprintf(", %d of the cycles between two reads told by link_downed", h.Inferred)
	}
	if h.Blind {
		e += "; link_downed is saturated (255) or unreadable: cycles between two reads are seen only through link " +
			"notifications or --collector.portwatch.interval (perfquery -R clears the counter)"
	}
	return e
}

func sumTransitions(h portwatch.History) uint64 {
	var n uint64
	for _, v := range h.Transitions {
		n += v
	}
	return n
}

// eachWatched judges every port the sampler watches with judge; a port
// never ACTIVE since rdma_doctor started skips (a spare port, see
// port.state), and a host without ports says so.
func eachWatched(s *diagnose.Reading, judge func(h portwatch.History, f diagnose.Finding) diagnose.Finding) []diagnose.Finding {
	var out []diagnose.Finding
	ports, _ := s.PortHistory()
	for _, h := range ports {
		t := watchedTarget(h)
		if !h.WasActive {
			out = append(out, diagnose.Finding{Severity: diagnose.Skip, Target: t, Evidence: "the port has not been ACTIVE since rdma_doctor started"})
			continue
		}
		out = append(out, judge(h, diagnose.Finding{Target: t, Severity: diagnose.Pass, Evidence: watchEvidence(h)}))
	}
	if len(out) == 0 {
		return kit.NoTargets("no RDMA ports on this host")
	}
	return out
}

func checkPortFlap(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	th := cfg.Diagnose.Thresholds.Links.Effective()
	window := time.Duration(th.FlapWindow)
	return eachWatched(s, func(h portwatch.History, f diagnose.Finding) diagnose.Finding {
		f.Observed = fmt.Sprintf("%d down-up cycle(s) in the last %v", len(h.Cycles), window)
		f.Expected = fmt.Sprintf("fewer than %d", th.FlapCycles)
		if len(h.Cycles) >= th.FlapCycles {
			f.Severity = diagnose.Fail
			f.Remedy = fmt.Sprintf("%s went down and came back %d times in %v: reseat or replace its cable and transceiver and check the "+
				"peer switch port", f.Target, len(h.Cycles), window)
			if d, p := kit.IbPortOf(s, h.Device, h.Port); d != nil {
				f.Remedy += "; " + kit.LinkTool(d, p, "-c", "-S") + " shows the physical counters"
			}
		}
		return f
	}), nil
}

func checkPortDrop(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	after := time.Duration(cfg.Diagnose.Thresholds.Links.Effective().DropAfter)
	return eachWatched(s, func(h portwatch.History, f diagnose.Finding) diagnose.Finding {
		f.Observed, f.Expected = "ACTIVE", fmt.Sprintf("not down for %v or longer", after)
		if !h.DownSince.IsZero() {
			down := s.Time.Sub(h.DownSince).Truncate(time.Second)
			f.Observed = fmt.Sprintf("%s (%s) for %v", h.State.Name, h.PhysState.Name, down)
			if down >= after {
				f.Severity = diagnose.Fail
				f.Remedy = fmt.Sprintf("%s was ACTIVE and has been down for %v: fix the physical link (see port.phys for %s), then the SM (port.state)", f.Target, down, f.Target)
			}
		}
		return f
	}), nil
}
