// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package link

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

// FirmwareChecks registers the checks of firmware.go; checks.All lists every concern's.
func FirmwareChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{
		ID:    "fw.version",
		Title: "Firmware matches the policy",
		Reads: []diagnose.Source{diagnose.SourceInfiniband},
		Doc: "fw_ver is at least the minimum and, when an allowed list is given, one of it, per board_id " +
			"(PSID) or hca_type (diagnose.firmware; a board_id policy wins). Without a policy for the device the check skips.",
		Remedy: "mlxfwmanager --query -d <pci>; update in a maintenance window (mlxfwmanager -u, or mstflint -d <pci> -i <image> burn), " +
			"then mlxfwreset or reboot. rdma_doctor never flashes firmware.",
		Run: checkFWVersion,
	})
	l.Register(&diagnose.Check{
		ID:    "fw.uniform",
		Title: "Same firmware on same-model HCAs",
		Reads: []diagnose.Source{diagnose.SourceInfiniband},
		Doc: "All devices of one model (hca_type, or board_id where hca_type is absent) run the same fw_ver " +
			"(ibdiagnet's firmware uniformity check); a device that differs from the others warns.",
		Remedy: "Bring the odd device to the version of the others with mlxfwmanager (maintenance window).",
		Run:    checkFWUniform,
	})
}

func fwPolicy(cfg *config.Config, d *infiniband.Device) (config.FirmwarePolicy, string, bool) {
	if d.BoardID.OK {
		for _, p := range cfg.Diagnose.Firmware {
			if p.BoardID == d.BoardID.V {
				return p, "board_id " + p.BoardID, true
			}
		}
	}
	if d.HCAType.OK {
		for _, p := range cfg.Diagnose.Firmware {
			if p.HCAType == d.HCAType.V {
				return p, "hca_type " + p.HCAType, true
			}
		}
	}
	return config.FirmwarePolicy{}, "", false
}

// fwUpdateRemedy is the vendor's way to query and update a device's
// firmware (kit/vendor.go).
func fwUpdateRemedy(d *infiniband.Device, want string) string { return kit.FWUpdateTool(d, want) }

func checkFWVersion(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	var out []diagnose.Finding
	for i := range s.IB().Devices {
		d := &s.IB().Devices[i]
		if !d.FirmwareVer.OK {
			if kit.FileErr(d, "fw_ver") != nil || d.NodeType.OK {
				out = append(out, kit.Unreadable(d.Name, d, "fw_ver"))
			}
			continue
		}
		fw := d.FirmwareVer.V
		if fw == "" {
			// Empty by design (qib, rxe, siw): nothing to judge.
			out = append(out, diagnose.Finding{Severity: diagnose.Skip, Target: d.Name,
				Evidence: "/sys/class/infiniband/" + d.Name + "/fw_ver is empty: the driver reports no firmware version"})
			continue
		}
		p, sel, ok := fwPolicy(cfg, d)
		if !ok {
			model := []string{}
			if d.BoardID.OK {
				model = append(model, "board_id "+d.BoardID.V)
			}
			if d.HCAType.OK {
				model = append(model, "hca_type "+d.HCAType.V)
			}
			out = append(out, diagnose.Finding{Severity: diagnose.Skip, Target: d.Name, Observed: fw,
				Evidence: fmt.Sprintf("no firmware policy for %s: add one to diagnose.firmware", kit.OrText(model, "this device"))})
			continue
		}
		var want []string
		if p.Minimum != "" {
			want = append(want, ">= "+string(p.Minimum))
		}
		if len(p.Allowed) > 0 {
			want = append(want, "one of "+strings.Join(p.Allowed, ", "))
		}
		f := diagnose.Finding{Target: d.Name, Observed: fw,
			Expected: strings.Join(want, " and ") + " (diagnose.firmware " + sel + ")",
			Evidence: "/sys/class/infiniband/" + d.Name + "/fw_ver", Severity: diagnose.Pass}
		switch {
		case p.Minimum != "" && config.CompareVersions(fw, string(p.Minimum)) < 0:
			f.Severity = diagnose.Warn
			f.Remedy = fwUpdateRemedy(d, string(p.Minimum)+" or later")
		case len(p.Allowed) > 0 && !slices.Contains(p.Allowed, fw):
			f.Severity = diagnose.Warn
			f.Remedy = fwUpdateRemedy(d, "an allowed version ("+strings.Join(p.Allowed, ", ")+")")
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return kit.NoTargets("no device reports fw_ver"), nil
	}
	return out, nil
}

func checkFWUniform(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	type member struct {
		d  *infiniband.Device
		fw string
	}
	groups := map[string][]member{}
	var order []string
	for i := range s.IB().Devices {
		d := &s.IB().Devices[i]
		var model string
		switch {
		case d.HCAType.OK && d.HCAType.V != "":
			model = "hca_type " + d.HCAType.V
		case d.BoardID.OK && d.BoardID.V != "":
			model = "board_id " + d.BoardID.V
		default:
			continue
		}
		if !d.FirmwareVer.OK || d.FirmwareVer.V == "" {
			continue
		}
		if _, seen := groups[model]; !seen {
			order = append(order, model)
		}
		groups[model] = append(groups[model], member{d, d.FirmwareVer.V})
	}
	var out []diagnose.Finding
	for _, model := range order {
		ms := groups[model]
		if len(ms) < 2 {
			out = append(out, diagnose.Finding{Severity: diagnose.Skip, Target: ms[0].d.Name, Observed: ms[0].fw,
				Evidence: "no other device of " + model + " on this host to compare with"})
			continue
		}
		count := map[string]int{}
		for _, m := range ms {
			count[m.fw]++
		}
		versions := make([]string, 0, len(count))
		for v := range count {
			versions = append(versions, v)
		}
		// The reference is the most common version; on a tie, the newest.
		sort.Slice(versions, func(i, j int) bool {
			if count[versions[i]] != count[versions[j]] {
				return count[versions[i]] > count[versions[j]]
			}
			return config.CompareVersions(versions[i], versions[j]) > 0
		})
		ref := versions[0]
		var ev []string
		for _, v := range versions {
			var names []string
			for _, m := range ms {
				if m.fw == v {
					names = append(names, m.d.Name)
				}
			}
			ev = append(ev, v+" on "+strings.Join(names, ", "))
		}
		for _, m := range ms {
			f := diagnose.Finding{Target: m.d.Name, Observed: m.fw,
				Expected: fmt.Sprintf("%s, as %d of %d %s devices", ref, count[ref], len(ms), model),
				Evidence: "fw_ver: " + strings.Join(ev, "; "), Severity: diagnose.Pass}
			if len(count) > 1 && m.fw != ref {
				f.Severity = diagnose.Warn
				f.Remedy = fwUpdateRemedy(m.d, ref+" (the version of the other "+model+" devices)")
			}
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return kit.NoTargets("no device reports fw_ver with a model (hca_type or board_id)"), nil
	}
	return out, nil
}
