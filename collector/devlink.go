// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"errors"
	"sort"

	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/read/devlink"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

type devlinkCollector struct {
	state, errs, recovers, pending, fwInfo, requests, skipped *expo.Desc
}

func devlinkSpec() Spec {
	return Spec{Name: "devlink", Default: true,
		Help: "devlink health reporters of each RDMA device's PCI function (mlx5 fw, fw_fatal, tx, rx, vnic: state, errors, recoveries) and its firmware versions running and stored (burned, not activated); live /sys only, no privileges; one reporter dump per scrape, one INFO_GET per device on the slow interval",
		New:  func(env Env, _ *Flags) (Collector, error) { return NewDevlinkCollector(env), nil }}
}

// NewDevlinkCollector builds the devlink collector: health reporters and
// firmware versions of the kept RDMA devices from the running kernel
// (main sets the connection only for the live /sys).
func NewDevlinkCollector(Env) Collector {
	l := []string{"device", "reporter"}
	return &devlinkCollector{
		state: desc("rdma_devlink_health_reporter_state",
			"1 when the device's devlink health reporter is healthy, 0 in error (mlx5 fw, fw_fatal, tx, rx, vnic).", l...),
		errs: desc("rdma_devlink_health_reporter_errors_total",
			"Errors the driver reported to the health reporter since it was registered (driver load).", l...),
		recovers: desc("rdma_devlink_health_reporter_recovers_total",
			"Successful recoveries of the health reporter since it was registered.", l...),
		pending: desc("rdma_device_firmware_pending",
			"1 when the firmware component's stored version differs from the running one (burned, not activated), 0 when equal.",
			"device", "component"),
		fwInfo: desc("rdma_device_firmware_version_info",
			"Running and stored version of each firmware component from devlink dev info; always 1.",
			"device", "component", "running", "stored"),
		requests: desc("rdma_devlink_requests",
			"devlink netlink requests by query and outcome (ok, unsupported, denied, error, ...): why series are absent.",
			"query", "status"),
		skipped: desc("rdma_devlink_skipped_values",
			"Health reporters and firmware versions left out because a name or value is not a bounded label value.", "query"),
	}
}

func (c *devlinkCollector) Update(ctx context.Context, snap *host.Snapshot, out *sink) error {
	dl, err := snap.Devlink(ctx)
	if errors.Is(err, host.ErrNotLive) || errors.Is(err, infiniband.ErrNoClass) {
		// Not the running kernel, or no RDMA on this host: nothing to
		// ask devlink about, nothing wrong (as the infiniband collector).
		return nil
	}
	if dl == nil {
		return err
	}
	for _, d := range dl.Devices {
		c.reporters(out, d)
		if d.Info == nil {
			continue
		}
		for _, comp := range devlink.Components(*d.Info) {
			if comp.Pending.OK {
				gauge(out, c.pending, b2f(comp.Pending.V), d.Name, comp.Name)
			}
		}
		for _, r := range d.Info.Running {
			st, _ := devlink.Lookup(d.Info.Stored, r.Name)
			gauge(out, c.fwInfo, 1, d.Name, r.Name, r.Value, st)
		}
	}
	var errs []error
	for _, s := range []*devlink.Snapshot{dl.Health, dl.Info} {
		if s == nil {
			continue
		}
		queries := make([]string, 0, len(s.Outcomes))
		for q := range s.Outcomes {
			queries = append(queries, string(q))
		}
		sort.Strings(queries)
		for _, q := range queries {
			for st, n := range s.Outcomes[devlink.Query(q)] {
				gauge(out, c.requests, float64(n), q, string(st))
			}
			gauge(out, c.skipped, float64(s.Skipped), q)
		}
		errs = append(errs, s.Errors...)
	}
	return errors.Join(errs...)
}

// reporters exports one series per device and reporter name. A name on
// several ports of one function (a vnic reporter per representor) is
// one series: the worst state and the summed counts.
func (c *devlinkCollector) reporters(out *sink, d host.DevlinkDevice) {
	type agg struct {
		healthy, stateOK   bool
		errs, recs         uint64
		haveErrs, haveRecs bool
	}
	by := map[string]*agg{}
	var names []string
	for _, r := range d.Reporters {
		a := by[r.Name]
		if a == nil {
			a = &agg{healthy: true}
			by[r.Name] = a
			names = append(names, r.Name)
		}
		if r.State.OK && (r.State.V == devlink.StateHealthy || r.State.V == devlink.StateError) {
			a.stateOK = true
			a.healthy = a.healthy && r.State.V == devlink.StateHealthy
		}
		if r.Errors.OK {
			a.errs, a.haveErrs = a.errs+r.Errors.V, true
		}
		if r.Recovers.OK {
			a.recs, a.haveRecs = a.recs+r.Recovers.V, true
		}
	}
	for _, n := range names {
		a := by[n]
		if a.stateOK {
			gauge(out, c.state, b2f(a.healthy), d.Name, n)
		}
		if a.haveErrs {
			counter(out, c.errs, float64(a.errs), d.Name, n)
		}
		if a.haveRecs {
			counter(out, c.recovers, float64(a.recs), d.Name, n)
		}
	}
}
