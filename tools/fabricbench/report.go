// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rdma-doctor/rdma_doctor/tools/internal/docsection"
)

// Issue 28's goals at 4000 hosts.
const (
	goalHosts         = 4000
	goalSweepVsTD     = 0.25 // a full sweep's CPU against one treydock scrape's
	goalScrapeMedianS = 0.050
	goalRSSBytes      = 200 << 20
	// linearSlack: growth is linear in ports when the per-port cost at the
	// largest size is at most this times the smallest size's (fixed costs
	// only make the larger fabric cheaper per port).
	linearSlack = 1.5
)

func writeReport(o options, r *results) error {
	var b strings.Builder
	section(&b, r)
	if o.out == "" {
		_, err := os.Stdout.WriteString(b.String())
		return err
	}
	doc, err := os.ReadFile(o.out)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	out, err := docsection.Splice(string(doc), b.String(), docsection.FabricBegin, docsection.FabricEnd)
	if err != nil {
		return fmt.Errorf("%s: %w", o.out, err)
	}
	if err := os.WriteFile(o.out, []byte(out), 0o644); err != nil {
		return err
	}
	logf("wrote the fabric section of %s", o.out)
	return nil
}

func ms(s float64) string { return fmt.Sprintf("%.1f ms", s*1000) }

func secs(s float64) string {
	if s < 1 {
		return ms(s)
	}
	return fmt.Sprintf("%.2f s", s)
}

func mib(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func thousands(n int) string {
	if n >= 10000 {
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	}
	return fmt.Sprint(n)
}

func yes(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**not met**"
}

func section(w io.Writer, r *results) {
	fmt.Fprintln(w, docsection.FabricBegin)
	fmt.Fprint(w, "## Fabric: the counter sweep, the route read and treydock/infiniband_exporter\n\n")
	fmt.Fprintf(w, "Measured at commit %s on %s (%s, %d cores, shared), on %s. Rerun with `%s TREYDOCK_EXPORTER=/path/to/infiniband_exporter` "+
		"(`FABRIC_SIZES=200` for a quick run; tools/fabricbench, which writes this section).\n\n", r.Commit, r.Date, r.CPU, r.Cores, r.Tools, r.Command)
	fmt.Fprint(w, "Each fabric is a generated two-level fat tree (internal/dev/ibsimtest: 36-port leaves, 18 hosts down and one uplink to each of 18 spines up) "+
		"run by ibsim with the real opensm; both exporters run the real infiniband-diags through umad2sim, on the same fabric, and are measured in turns: "+
		"each round waits for rdma_doctor's sweep to end, scrapes treydock once, then scrapes rdma_doctor with the fabric cached. "+
		"CPU is CPU time, not wall: utime+stime+cutime+cstime of the exporter's process from /proc/PID/stat, so the tools it runs and reaps (treydock's perfquery and ibnetdiscover, rdma_doctor's ibqueryerrors and ibnetdiscover) count as its own. "+
		"rdma_doctor's sweep CPU is its CPU between the end of a round's scrapes and the end of the next sweep, divided by the sweeps counted in rdma_fabric_counter_sweep_runs_total "+
		"(its fabric scan runs once, before the first round); a round in which a sweep overlapped the scrapes is left out and listed below. "+
		routesText(r)+
		"The simulator adds no wire latency and serves MADs from one process: walls are CPU-bound lower bounds, not a real fabric's; ibsim's own CPU is in neither figure. "+
		rdmaFlags(r)+
		"treydock runs `--collector.switch --no-collector.hca` (its defaults: switch ports, `perfquery -x` one switch at a time) and is scraped over HTTP, not with `--exporter.runonce`. "+
		"Scrapes ask for gzip with Prometheus 3's Accept header. "+
		"One bare perfquery is the CPU of `perfquery` reading the local port (one MAD), run by fabricbench itself: on this simulator most of it is umad2sim's per-process setup, "+
		"so an exporter's tool runs per sweep or scrape times it is the floor of its CPU here. "+
		"Stock ibsim does not advertise the additional extended counters, so treydock's `perfquery -x` reads only the data counters here: "+
		"its samples and parsing are fewer than on a real fabric, where `-x` answers the 64-bit error counters too.\n\n")
	if r.TreydockSkipped != "" {
		fmt.Fprintf(w, "treydock was skipped in this run: %s.\n\n", r.TreydockSkipped)
	} else {
		fmt.Fprintf(w, "treydock: %s.\n\n", r.Treydock)
	}

	fmt.Fprintln(w, "| hosts (switches, switch ports) | SUBNET UP | one bare perfquery: CPU | rdma_doctor sweep: CPU, wall | route read: CPU, wall | sweep interval with routes: amortised, with a read | cached scrape: median (max), CPU | samples (bytes) | RSS, peak | treydock scrape: CPU (min-max), wall | samples (bytes) | RSS, peak | sweep CPU with a read / treydock scrape CPU | sweep CPU with routes amortised / treydock scrape CPU |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range r.Sizes {
		d := s.RdmaDoctor
		fmt.Fprintf(w, "| %d (%d, %d) | %s | %s | %s, %s (%d sweeps, %.0f ports each) | %s | %s | %s (%s), %s (%d scrapes) | %s (%.1f MB) | %s, %s ",
			s.Hosts, s.Switches, s.SwitchPorts, secs(s.SubnetUpS), ms(s.PerfqueryCPUS), secs(d.SweepCPUS), secs(d.SweepWallS), d.Sweeps, d.SweptPorts,
			routeCell(d), intervalCell(d),
			ms(d.ScrapeMedianS), ms(d.ScrapeMaxS), ms(d.ScrapeCPUS), d.Scrapes, thousands(d.Samples), float64(d.BodyBytes)/1e6, mib(d.RSS), mib(d.HWM))
		if t := s.Treydock; t != nil {
			fmt.Fprintf(w, "| %s (%s-%s), %s (%d scrapes) | %s (%.1f MB) | %s, %s | %.3f | %.3f |\n",
				secs(t.CPUS), secs(t.CPUMinS), secs(t.CPUMaxS), secs(t.WallS), t.Scrapes, thousands(t.Samples), float64(t.BodyBytes)/1e6, mib(t.RSS), mib(t.HWM), d.withRead()/t.CPUS, d.amortised()/t.CPUS)
		} else {
			fmt.Fprint(w, "| skipped | | | | |\n")
		}
	}
	fmt.Fprintln(w)
	goals(w, r)
	var notes []string
	for _, s := range r.Sizes {
		notes = append(notes, s.Notes...)
	}
	for _, s := range r.Sizes {
		if d := s.RdmaDoctor; d.RouteReads > 0 {
			notes = append(notes, fmt.Sprintf("%d hosts: rdma_doctor's last route read read %.0f switches' tables whole and left %.0f unknown; %.0f reads failed (rdma_fabric_routes_read_failures_total)", s.Hosts, d.RouteSwitches, d.RouteUnknown, d.RouteFailures))
		}
		if t := s.Treydock; t != nil && t.CollectErrors != nil {
			notes = append(notes, fmt.Sprintf("%d hosts: treydock counted %.0f failed or timed-out perfquery runs in its measured scrapes (infiniband_exporter_collect_errors and _timeouts); rdma_doctor's last sweep left %.0f ports unknown", s.Hosts, *t.CollectErrors, s.RdmaDoctor.UnknownPorts))
		} else if s.RdmaDoctor.UnknownPorts == 0 {
			notes = append(notes, fmt.Sprintf("%d hosts: rdma_doctor's last sweep left no port unknown", s.Hosts))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w, "Completeness, and rounds left out:")
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, docsection.FabricEnd)
}

// goals judges issue 28's goals at 4000 hosts (the run's largest size
// when it has no 4000-host fabric: then said so).
func goals(w io.Writer, r *results) {
	if len(r.Sizes) == 0 {
		return
	}
	big := r.Sizes[0]
	for _, s := range r.Sizes {
		if s.Hosts > big.Hosts {
			big = s
		}
	}
	if big.Hosts != goalHosts {
		fmt.Fprintf(w, "The goals below are set at %d hosts; this run's largest fabric has %d, so they are shown for it only as an indication.\n\n", goalHosts, big.Hosts)
	}
	d := big.RdmaDoctor
	fmt.Fprintf(w, "| goal (issue 28, at %d hosts) | measured at %d hosts | |\n|---|---|---|\n", goalHosts, big.Hosts)
	sweepGoal := "a full sweep of every switch port"
	if d.RouteReadCPUS > 0 {
		// Issue 38: the route read counted in as it runs, amortised.
		sweepGoal += fmt.Sprintf(", with the route read amortised as it runs (issue 38; at the defaults with no fabric change, a read every %s of %s sweeps)", dur(d.DefaultMaxAgeS), dur(d.DefaultIntervalS))
	}
	if t := big.Treydock; t != nil {
		ratio := d.amortised() / t.CPUS
		fmt.Fprintf(w, "| %s: at most %.2fx the CPU of one treydock scrape | %s / %s = %.3fx | %s |\n",
			sweepGoal, goalSweepVsTD, secs(d.amortised()), secs(t.CPUS), ratio, yes(ratio <= goalSweepVsTD))
		if d.RouteReadCPUS > 0 {
			// The costliest intervals: that of a fabric change and the
			// next (its confirming read), a whole read beside the sweep.
			wr := d.withRead() / t.CPUS
			fmt.Fprintf(w, "| the same in the interval of a fabric change or its confirming read (the sweep and one whole read) | %s / %s = %.3fx | %s |\n",
				secs(d.withRead()), secs(t.CPUS), wr, yes(wr <= goalSweepVsTD))
		}
	} else {
		fmt.Fprintf(w, "| %s: at most %.2fx the CPU of one treydock scrape | sweep %s; treydock skipped | not judged |\n", sweepGoal, goalSweepVsTD, secs(d.amortised()))
	}
	fmt.Fprintf(w, "| cached scrape: median at most %s | %s | %s |\n", ms(goalScrapeMedianS), ms(d.ScrapeMedianS), yes(d.ScrapeMedianS <= goalScrapeMedianS))
	fmt.Fprintf(w, "| resident memory at most %s (judged on the peak, VmHWM) | RSS %s, peak %s | %s |\n", mib(goalRSSBytes), mib(d.RSS), mib(d.HWM), yes(d.HWM <= goalRSSBytes))
	small := r.Sizes[0]
	for _, s := range r.Sizes {
		if s.SwitchPorts < small.SwitchPorts {
			small = s
		}
	}
	if small.SwitchPorts == big.SwitchPorts {
		fmt.Fprintln(w, "| growth linear in ports | one size only | not judged |")
	} else {
		per := func(s *sizeResult, v float64) float64 { return v / float64(s.SwitchPorts) * 1e6 }
		sw := per(big, d.SweepCPUS) / per(small, small.RdmaDoctor.SweepCPUS)
		sc := per(big, d.ScrapeCPUS) / per(small, small.RdmaDoctor.ScrapeCPUS)
		mem := float64(d.HWM) / float64(small.RdmaDoctor.HWM)
		ports := float64(big.SwitchPorts) / float64(small.SwitchPorts)
		fmt.Fprintf(w, "| growth linear in ports (per-port cost at %d hosts at most %.1fx that at %d) | %.1fx the ports: sweep CPU %.1f µs/port (%.2fx), scrape CPU %.2f µs/port (%.2fx), peak RSS %.2fx | %s |\n",
			big.Hosts, linearSlack, small.Hosts, ports, per(big, d.SweepCPUS), sw, per(big, d.ScrapeCPUS), sc, mem,
			yes(sw <= linearSlack && sc <= linearSlack && mem <= ports*linearSlack))
	}
	fmt.Fprintln(w)
}

// withRead is the CPU of a counters interval in which the route read runs
// beside the sweep (the sweep alone where no read was measured).
func (d rdmaResult) withRead() float64 { return d.SweepCPUS + d.RouteReadCPUS }

// amortised is the CPU of a counters interval at the binary's defaults
// when the fabric does not change: a read every routes-max-age.
func (d rdmaResult) amortised() float64 {
	if d.DefaultMaxAgeS <= 0 {
		return d.SweepCPUS
	}
	return d.SweepCPUS + d.RouteReadCPUS*min(1, d.DefaultIntervalS/d.DefaultMaxAgeS)
}

func dur(s float64) string { return time.Duration(s * float64(time.Second)).String() }

func routeCell(d rdmaResult) string {
	if d.RouteReads == 0 {
		return "not measured"
	}
	if d.RouteReadCPUS == 0 {
		return fmt.Sprintf("in the sweep's (%d reads)", d.RouteReads)
	}
	return fmt.Sprintf("%s, %s (%d reads)", secs(d.RouteReadCPUS), secs(d.RouteReadWallS), d.RouteReads)
}

func intervalCell(d rdmaResult) string {
	if d.RouteReadCPUS == 0 {
		return "-"
	}
	return fmt.Sprintf("%s, %s", secs(d.amortised()), secs(d.withRead()))
}

// routesText says how the route read was measured.
func routesText(r *results) string {
	for _, s := range r.Sizes {
		if d := s.RdmaDoctor; d.RouteReads > 0 {
			return fmt.Sprintf("The route read (one dump_fts run over every switch and its parse, `--collector.fabric.routes`, on by default) runs in the same process; in production it runs once after a fabric change, once more to confirm the tables (the next check), and then at most every `--collector.fabric.routes-max-age` (default %s, against a %s counters interval). "+
				"The bench sets the max age to 1.5 counters intervals, so that once confirmed it reads at every other sweep: the windows with and without a read alternate, and the read's CPU and the sweep's are the least-squares split of the windows' CPU over the sweeps and reads counted in them (rdma_fabric_routes_reads_total); its wall is the median of rdma_fabric_routes_read_duration_seconds. "+
				"Amortised is the sweep plus a read times counters interval / max age at the defaults, a fabric that does not change; a sweep interval with a read is the sweep plus one whole read (the interval of a fabric change, and the next, which confirms it). ", dur(d.DefaultMaxAgeS), dur(d.DefaultIntervalS))
		}
	}
	return ""
}

// rdmaFlags says how rdma_doctor ran.
func rdmaFlags(r *results) string {
	if len(r.ExtraArgs) == 0 {
		return "rdma_doctor runs `--collector.disable-defaults --collector.fabric` (every counter series: `--collector.fabric.port-series=all`, the default; a sweep is two ibqueryerrors runs against the fabric cache its first sweep discovered with ibnetdiscover); "
	}
	return fmt.Sprintf("rdma_doctor runs `--collector.disable-defaults --collector.fabric %s`; ", strings.Join(r.ExtraArgs, " "))
}
