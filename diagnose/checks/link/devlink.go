// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package link

import (
	"fmt"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/devlink"
)

// DevlinkChecks registers the checks of devlink.go; checks.All lists every concern's.
func DevlinkChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{
		ID:    "fw.pending",
		Title: "No firmware burned and left inactive",
		Reads: []diagnose.Source{diagnose.SourceDevlink},
		Doc: "devlink dev info of each RDMA device's PCI function: a component (mlx5: fw.version) whose stored version differs " +
			"from the running one is firmware flashed but not activated, so the device runs the old firmware until " +
			"mlxfwreset or a reboot, and will change under its workload at the next one; that warns. A stored version the " +
			"driver reports for a failed query (mlx5: 255.255.65535) warns as unknown. Asked of the running kernel only.",
		Remedy: "Activate in a maintenance window: mlxfwreset -d <pci> reset (or reboot); mlxfwmanager --query -d <pci> shows both versions.",
		Run:    checkFirmwarePending,
	})
	l.Register(&diagnose.Check{
		ID:    "devlink.health",
		Title: "devlink health reporters healthy",
		Reads: []diagnose.Source{diagnose.SourceDevlink},
		Doc: "devlink health show of each RDMA device's PCI function and its ports (mlx5: fw, fw_fatal, tx, rx, vnic). A " +
			"reporter in error state is one whose last error the driver did not recover: fw_fatal in error fails (the " +
			"firmware is dead until the recovery reloads the driver), any other warns. Error and recovery counts since the " +
			"driver loaded are in the observation. Asked of the running kernel only.",
		Remedy: "devlink health diagnose pci/<pci> reporter <name>; devlink health dump show pci/<pci> reporter <name> for the " +
			"firmware's dump; devlink health recover pci/<pci> reporter <name> to run the recovery; a fw_fatal that does not " +
			"recover needs mlxfwreset -d <pci> reset or a reboot.",
		Run: checkDevlinkHealth,
	})
}

// noDevlinkInstance explains a device devlink said nothing of.
func noDevlinkInstance(d host.DevlinkDevice, what string) diagnose.Finding {
	return diagnose.Finding{Severity: diagnose.Skip, Target: d.Name,
		Evidence: fmt.Sprintf("devlink reports no %s for pci/%s: the driver registers no devlink instance there (or the read failed; see rdma_devlink_requests)", what, d.PCI)}
}

func checkFirmwarePending(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	var out []diagnose.Finding
	for _, d := range s.Devlink().Devices {
		if d.Info == nil {
			out = append(out, noDevlinkInstance(d, "firmware versions"))
			continue
		}
		comps := devlink.Components(*d.Info)
		if len(comps) == 0 {
			out = append(out, diagnose.Finding{Severity: diagnose.Skip, Target: d.Name,
				Evidence: fmt.Sprintf("devlink dev info pci/%s has no component with both a running and a stored version", d.PCI)})
			continue
		}
		f := diagnose.Finding{Target: d.Name, Severity: diagnose.Pass, Expected: "stored firmware = running firmware",
			Evidence: fmt.Sprintf("devlink dev info pci/%s", d.PCI)}
		var obs []string
		for _, c := range comps {
			obs = append(obs, fmt.Sprintf("%s running %s stored %s", c.Name, c.Running, c.Stored))
			switch {
			case !c.Pending.OK:
				if f.Severity != diagnose.Warn {
					f.Severity, f.Unknown = diagnose.Warn, true
					f.Remedy = fmt.Sprintf("%s: the driver could not read the %s versions (a failed firmware query, often after a failed flash): "+
						"check dmesg for the driver's firmware messages and devlink dev info pci/%s", d.Name, c.Name, d.PCI)
					if kit.VendorOf(s, d.Name) == kit.VendorNVIDIA {
						f.Remedy = fmt.Sprintf("%s: the driver could not read the %s versions (a failed firmware query, often after a failed flash): "+
							"check dmesg for mlxfw and mlx5_fw_image_pending messages and mlxfwmanager --query -d %s", d.Name, c.Name, d.PCI)
					}
				}
			case c.Pending.V:
				f.Severity, f.Unknown = diagnose.Warn, false
				f.Remedy = fmt.Sprintf("%s runs %s %s while %s is flashed: activate it in a maintenance window with devlink dev reload pci/%s "+
					"action fw_activate where the driver supports it, or reboot", d.Name, c.Name, c.Running, c.Stored, d.PCI)
				if kit.VendorOf(s, d.Name) == kit.VendorNVIDIA {
					f.Remedy = fmt.Sprintf("%s runs %s %s while %s is flashed: activate it in a maintenance window with mlxfwreset -d %s reset, or reboot",
						d.Name, c.Name, c.Running, c.Stored, d.PCI)
				}
			}
		}
		f.Observed = strings.Join(obs, "; ")
		out = append(out, f)
	}
	if len(out) == 0 {
		return kit.NoTargets("no RDMA device with a PCI function"), nil
	}
	return out, nil
}

func checkDevlinkHealth(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	var out []diagnose.Finding
	for _, d := range s.Devlink().Devices {
		if len(d.Reporters) == 0 {
			out = append(out, noDevlinkInstance(d, "health reporters"))
			continue
		}
		f := diagnose.Finding{Target: d.Name, Severity: diagnose.Pass, Expected: "every health reporter healthy",
			Evidence: fmt.Sprintf("devlink health show pci/%s", d.PCI)}
		var obs []string
		for _, r := range d.Reporters {
			name := r.Name
			if r.Port.OK {
				name = fmt.Sprintf("%s (port %d)", r.Name, r.Port.V)
			}
			st := "unknown"
			if r.State.OK {
				st = r.State.V.String()
			}
			obs = append(obs, fmt.Sprintf("%s %s, %s errors, %s recovered", name, st, optCount(r.Errors), optCount(r.Recovers)))
			if !r.State.OK || r.State.V != devlink.StateError {
				continue
			}
			sev := diagnose.Warn
			if r.Name == "fw_fatal" {
				sev = diagnose.Fail
			}
			if sev.Worse(f.Severity) || f.Remedy == "" {
				f.Severity = sev
				f.Remedy = fmt.Sprintf("%s: reporter %s is in error: devlink health diagnose pci/%s reporter %s, then devlink health recover pci/%s reporter %s",
					d.Name, r.Name, d.PCI, r.Name, d.PCI, r.Name)
				if r.Name == "fw_fatal" {
					f.Remedy += fmt.Sprintf("; if it stays in error, mlxfwreset -d %s reset or reboot", d.PCI)
				}
			}
		}
		f.Observed = strings.Join(obs, "; ")
		out = append(out, f)
	}
	if len(out) == 0 {
		return kit.NoTargets("no RDMA device with a PCI function"), nil
	}
	return out, nil
}

func optCount(o devlink.Opt[uint64]) string {
	if !o.OK {
		return "?"
	}
	return fmt.Sprint(o.V)
}
