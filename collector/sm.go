// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/alecthomas/kingpin/v2"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sm"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

// SMCollector exports sminfo's answers and the local OpenSM. The sysfs view
// of SM presence (rdma_sm_port_has_sm) comes from the infiniband
// collector, which reads those files anyway.
type SMCollector struct {
	success, runs, failures, duration, lastSuccess  *expo.Desc
	info, lid, priority, state, activity, stalled   *expo.Desc
	running, processes, process                     *expo.Desc
	confInfo, confPrio, confSweep, confLMC, confBad *expo.Desc
	defaults                                        *expo.Desc
	logSubnetUp, logState, logErrors                *expo.Desc
}

func smSpec() Spec {
	return Spec{Name: "sm", Default: true,
		Help: "subnet manager: sminfo answers (background, needs umad access) and the local OpenSM process and configuration",
		Flags: func(app *kingpin.Application, f *Flags) {
			o := &f.SM
			app.Flag("collector.sm.sminfo-path",
				"sminfo executable (infiniband-diags), run without a shell in the background on each ACTIVE InfiniBand port that has a umad device (/sys/class/infiniband_mad/umadN and /dev/infiniband/umadN below --path.rootfs).").
				Default("sminfo").StringVar(&o.SminfoPath)
			app.Flag("collector.sm.sminfo-interval", "Interval between sminfo runs.").Default("1m").DurationVar(&o.Interval)
			app.Flag("collector.sm.sminfo-timeout", "Timeout of one sminfo run; its process group is killed after it.").Default("10s").DurationVar(&o.Timeout)
			app.Flag("collector.sm.opensm-config",
				"opensm.conf to read (a host path, below --path.rootfs) instead of the file a running opensm names with -F or the distributions' locations.").
				PlaceHolder("PATH").StringVar(&o.OpenSMConfig)
		},
		New: func(Env, *Flags) (Collector, error) { return NewSMCollector(), nil }}
}

// SMOptions are the sm collector's flags: the sminfo runs the host makes
// for it (host.Options.SM), and the opensm.conf to read instead of the
// search (host.Options.OpenSMConfig).
type SMOptions struct {
	host.SMOptions
	OpenSMConfig string
}

// HostSM is the sminfo runs the flags ask of the host: nil, never run,
// with the sm collector off.
func (f *Flags) HostSM() *host.SMOptions {
	if !f.Enabled("sm") {
		return nil
	}
	o := f.SM.SMOptions
	return &o
}

// NewSMCollector builds the sm collector. sminfo is the host's
// background source (host.Snapshot.SMStatus), run where the host's
// options ask for it.
func NewSMCollector() *SMCollector {
	pl := []string{"device", "port"}
	c := &SMCollector{
		success:     desc("rdma_sm_sminfo_success", "1 when the latest sminfo run through this port got an answer, 0 when it failed.", pl...),
		runs:        desc("rdma_sm_sminfo_runs_total", "sminfo runs through this port.", pl...),
		failures:    desc("rdma_sm_sminfo_failures_total", "Failed sminfo runs through this port.", pl...),
		duration:    desc("rdma_sm_sminfo_duration_seconds", "Duration of the latest sminfo run.", pl...),
		lastSuccess: desc("rdma_sm_sminfo_last_success_timestamp_seconds", "When sminfo last got an answer through this port.", pl...),
		info: desc("rdma_sm_info", "The subnet manager sminfo reached through this port (latest answer); always 1.",
			"device", "port", "sm_lid", "sm_guid", "state"),
		lid:       desc("rdma_sm_lid", "LID of the subnet manager sminfo reached (latest answer).", pl...),
		priority:  desc("rdma_sm_priority", "Priority of the subnet manager sminfo reached, 0-15 (latest answer).", pl...),
		state:     desc("rdma_sm_state", "State of the subnet manager sminfo reached: 0 NOTACTIVE, 1 DISCOVERING, 2 STANDBY, 3 MASTER (latest answer).", pl...),
		activity:  desc("rdma_sm_activity_count", "SMInfo ActCount of the subnet manager sminfo reached (latest answer); a working master increments it.", pl...),
		stalled:   desc("rdma_sm_activity_stalled", "1 when the same SM answered twice in a row without its activity count rising.", pl...),
		running:   desc("rdma_sm_opensm_running", "1 when an opensm process runs on this host (comm \"opensm\" under --path.procfs)."),
		processes: desc("rdma_sm_opensm_processes", "Number of opensm processes (Debian runs one per port)."),
		process: desc("rdma_sm_opensm_process_info", "A running opensm and the options on its command line (-g, -p, -F); always 1.",
			"guid", "priority", "config_file"),
		confInfo: desc("rdma_sm_opensm_config_info", "The opensm.conf read, with its guid, subnet_prefix and routing_engine (never a *_key); always 1.",
			"path", "guid", "subnet_prefix", "routing_engine"),
		confPrio:  desc("rdma_sm_opensm_config_sm_priority", "sm_priority in opensm.conf (0-15; highest wins, a tie goes to the lower GUID).", "path"),
		confSweep: desc("rdma_sm_opensm_config_sweep_interval_seconds", "sweep_interval in opensm.conf (0 disables sweeping).", "path"),
		confLMC:   desc("rdma_sm_opensm_config_lmc", "lmc in opensm.conf.", "path"),
		confBad:   desc("rdma_sm_opensm_config_malformed_lines", "Lines of the file that are not \"key value\" (or NAME=value) and were skipped; their content is never logged.", "path"),
		defaults: desc("rdma_sm_opensm_defaults_info", "The init scripts' variables (/etc/sysconfig/opensm GUIDS and PRIORITY, /etc/default/opensm PORTS); always 1.",
			"path", "guids", "priority", "ports"),
		logSubnetUp: desc("rdma_sm_opensm_log_subnet_up_timestamp_seconds",
			"When the running opensm last logged SUBNET UP, in seconds since the epoch.", "path"),
		logState: desc("rdma_sm_opensm_log_state_info", "The SM state of the last \"Entering <STATE> state\" line in the running opensm's log; always 1.", "path", "state"),
		logErrors: desc("rdma_sm_opensm_log_error_lines",
			"Numbered error lines (\"ERR xxxx:\") in the running opensm's log read so far; 0 again after a rotation.", "path"),
	}
	return c
}

// Update exports the latest sminfo results (the server's loop: never
// waiting for a run) and reads the local OpenSM state. A port whose latest sminfo run failed is
// an error of the collector: its SM series are missing (or, after an
// earlier answer, stale), so the SM alerts cannot fire for it, and
// rdma_scrape_collector_success must not claim otherwise. A run that
// cannot happen on this host at all (sminfo not installed, no umad
// access: the shipped systemd unit runs unprivileged) is not: like a
// host without ib_umad, it is how the host is deployed, and it would
// fail on every scrape of every such host.
func (c *SMCollector) Update(ctx context.Context, snap *host.Snapshot, out *sink) error {
	var errs []error
	st := snap.SMStatus(ctx)
	if st == nil {
		st = &sm.Status{} // sminfo not run: the local OpenSM only
	}
	if st.TargetsErr != nil && !errors.Is(st.TargetsErr, sm.ErrNoUmad) && !errors.Is(st.TargetsErr, sm.ErrNoUmadDevice) {
		errs = append(errs, st.TargetsErr)
	}
	for i := range st.Ports {
		p := &st.Ports[i]
		c.port(out, p)
		if !p.OK && p.Err != nil && !p.CannotRun() {
			errs = append(errs, fmt.Errorf("sminfo through %s: %w", p.Target.String(), p.Err))
		}
	}
	if err := c.local(ctx, snap, out); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c *SMCollector) port(out *sink, p *sm.PortStatus) {
	port := strconv.Itoa(p.Port)
	if !p.CannotRun() {
		gauge(out, c.success, b2f(p.OK), p.Device, port)
	}
	counter(out, c.runs, float64(p.Runs), p.Device, port)
	counter(out, c.failures, float64(p.Failures), p.Device, port)
	gauge(out, c.duration, p.Duration.Seconds(), p.Device, port)
	if !p.HaveInfo {
		return
	}
	gauge(out, c.lastSuccess, float64(p.LastSuccess.UnixNano())/1e9, p.Device, port)
	i := p.Info
	gauge(out, c.info, 1, p.Device, port, strconv.Itoa(i.LID), i.GUID, i.State.String())
	gauge(out, c.lid, float64(i.LID), p.Device, port)
	gauge(out, c.priority, float64(i.Priority), p.Device, port)
	gauge(out, c.state, float64(i.State), p.Device, port)
	gauge(out, c.activity, float64(i.ActivityCount), p.Device, port)
	gauge(out, c.stalled, b2f(p.Stalled), p.Device, port)
}

func (c *SMCollector) local(ctx context.Context, snap *host.Snapshot, out *sink) error {
	st, err := snap.OpenSM(ctx)
	if st == nil {
		return err
	}
	errs := []error{err}
	gauge(out, c.running, b2f(st.Running()))
	gauge(out, c.processes, float64(len(st.Processes)))
	for _, p := range st.Processes {
		prio := ""
		if p.Priority >= 0 {
			prio = strconv.Itoa(p.Priority)
		}
		gauge(out, c.process, 1, p.GUID, prio, p.ConfigFile)
	}
	if cf := st.Config; cf != nil {
		guid, _, gerr := cf.GUID("guid")
		prefix, _, perr := cf.GUID("subnet_prefix")
		engine, ok := cf.Get("routing_engine")
		if !ok {
			engine = "minhop"
		}
		errs = append(errs, gerr, perr)
		gauge(out, c.confInfo, 1, cf.Path, guid, prefix, engine)
		for _, o := range []struct {
			desc *expo.Desc
			name string
		}{{c.confPrio, "sm_priority"}, {c.confSweep, "sweep_interval"}, {c.confLMC, "lmc"}} {
			v, ok, err := cf.Int(o.name)
			if err != nil {
				errs = append(errs, err)
			} else if ok {
				gauge(out, o.desc, float64(v), cf.Path)
			}
		}
		gauge(out, c.confBad, float64(cf.Malformed), cf.Path)
	}
	for _, sh := range st.Shell {
		gauge(out, c.defaults, 1, sh.Path, sh.Values["GUIDS"], sh.Values["PRIORITY"], sh.Values["PORTS"])
		gauge(out, c.confBad, float64(sh.Malformed), sh.Path)
	}
	for _, l := range st.Logs {
		if !l.SubnetUp.IsZero() {
			gauge(out, c.logSubnetUp, float64(l.SubnetUp.UnixNano())/1e9, l.Path)
		}
		if l.State != "" {
			gauge(out, c.logState, 1, l.Path, l.State)
		}
		gauge(out, c.logErrors, float64(l.Errors), l.Path)
	}
	return errors.Join(errs...)
}
