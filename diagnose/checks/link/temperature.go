// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package link

import (
	"fmt"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hwmon"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

// tempMarginCelsius is how close to its critical threshold a sensor warns.
// The alert RdmaDeviceTemperatureNearCritical (alerts/rdma_doctor.rules.yml)
// uses the same 5 °C: on mlx5 the critical threshold is the firmware's
// warning event, 10 °C below the shutdown that takes the link down.
const tempMarginCelsius = 5

// TemperatureChecks registers the checks of temperature.go; checks.All lists every concern's.
func TemperatureChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{
		ID:    "hw.temperature",
		Title: "Adapter temperatures below critical",
		Reads: []diagnose.Source{diagnose.SourceHwmon},
		Doc: fmt.Sprintf("The temperature sensors the kernel's hwmon class registers on each RDMA device's PCI function (mlx5 "+
			"since Linux 6.6: the ASIC, and a plugged module with a thermal sensor as Module0): a sensor within %d °C of its "+
			"critical threshold (temp*_crit; mlx5: the firmware's warning event, 10 °C below shutdown) warns, one at or above it "+
			"fails. A sensor without a reading or without a threshold cannot be judged; a device with no judgeable sensor "+
			"skips, as does a host whose devices register none (kernels before 6.6, VFs, software devices). Read on the slow "+
			"interval: each read is a firmware command on mlx5.", tempMarginCelsius),
		Remedy: "ASIC hot: restore the airflow over the adapter (blocked vents, a missing blank, a failed fan: ipmitool sdr type Fan) " +
			"and raise the BMC fan profile; module hot: reseat the transceiver or cable, check it is a supported part " +
			"(mlxlink -d <pci> -m) and replace one that runs hot in a cooled slot.",
		Run: checkTemperature,
	})
}

func checkTemperature(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	if len(s.Hwmon().Devices) == 0 {
		why := "no RDMA device registers a temperature sensor (hwmon: mlx5 on Linux 6.6 and later; not on VFs or software devices)"
		if len(s.Hwmon().Errors) > 0 {
			why += "; read errors: " + diagnose.ErrorsText(s.Hwmon().Errors)
		}
		return kit.NoTargets(why), nil
	}
	out := make([]diagnose.Finding, 0, len(s.Hwmon().Devices))
	for i := range s.Hwmon().Devices {
		out = append(out, judgeTemperatures(&s.Hwmon().Devices[i], hwmonErrors(s, s.Hwmon().Devices[i].Name), kit.IBDevice(s, s.Hwmon().Devices[i].Name)))
	}
	return out, nil
}

// judgeTemperatures judges one device's sensors: the worst one decides.
func judgeTemperatures(d *hwmon.Device, errs []error, ib *infiniband.Device) diagnose.Finding {
	f := diagnose.Finding{Target: d.Name, Severity: diagnose.Skip,
		Expected: fmt.Sprintf("every sensor more than %d °C below its critical threshold", tempMarginCelsius),
		Evidence: "hwmon temp*_input and temp*_crit under /sys/class/infiniband/" + d.Name + "/device/hwmon"}
	// The module's own reading: mlxlink on NVIDIA devices, ethtool -m
	// on the port's netdev elsewhere (kit/vendor.go).
	dev := "ethtool -m <netdev>"
	if ib != nil && kit.IsNVIDIA(ib) {
		dev = "mlxlink -d " + kit.MlxlinkDev(ib) + " -m"
	} else if ib == nil && strings.HasPrefix(d.Name, "mlx5_") {
		dev = "mlxlink -d " + d.Name + " -m"
	}
	var obs, remedies []string
	for _, sn := range d.Sensors {
		obs = append(obs, sensorText(sn))
		if !sn.Input.OK || !sn.Crit.OK {
			continue
		}
		sev := diagnose.Pass
		switch {
		case sn.Input.V >= sn.Crit.V:
			sev = diagnose.Fail
		case sn.Input.V >= sn.Crit.V-tempMarginCelsius:
			sev = diagnose.Warn
		}
		if sev != diagnose.Pass {
			remedies = append(remedies, temperatureRemedy(d.Name, dev, sn))
		}
		if sev.Worse(f.Severity) {
			f.Severity = sev
		}
	}
	f.Observed = strings.Join(obs, "; ")
	f.Remedy = strings.Join(remedies, "; ")
	if f.Severity == diagnose.Skip {
		// Nothing to judge is a skip with the reason, not a pass.
		f.Observed = ""
		f.Evidence = "no sensor of " + d.Name + " has both a reading and a critical threshold: " + strings.Join(obs, "; ")
		if len(errs) > 0 {
			f.Evidence += "; read errors: " + diagnose.ErrorsText(errs)
		}
	}
	return f
}

// sensorText is one sensor as the observation lists it.
func sensorText(sn hwmon.Sensor) string {
	t := sn.Label + " "
	if sn.Input.OK {
		t += celsius(sn.Input.V)
	} else {
		t += "no reading"
	}
	var extra []string
	if sn.Crit.OK {
		extra = append(extra, "critical "+celsius(sn.Crit.V))
	} else {
		extra = append(extra, "no critical threshold")
	}
	if sn.Highest.OK {
		extra = append(extra, "highest "+celsius(sn.Highest.V))
	}
	return t + " (" + strings.Join(extra, ", ") + ")"
}

func celsius(v float64) string { return fmt.Sprintf("%g °C", v) }

// temperatureRemedy is the step for one hot sensor: a module (mlx5 labels
// it Module<N>) is seated or replaced, the ASIC gets air.
func temperatureRemedy(name, tool string, sn hwmon.Sensor) string {
	at := fmt.Sprintf("%s %s at %s, critical %s", name, sn.Label, celsius(sn.Input.V), celsius(sn.Crit.V))
	if strings.HasPrefix(sn.Label, "Module") {
		return at + ": reseat the transceiver or cable, check the cage's airflow and that the module is a supported part " +
			"(" + tool + " shows its temperature, vendor and part number), replace a module that runs hot in a cooled slot"
	}
	return at + ": restore the airflow over the adapter (blocked vents, a missing slot blank, a failed fan: ipmitool sdr type Fan), " +
		"raise the BMC fan profile, check the adapter's heatsink; past the critical threshold the firmware shuts the link down"
}

// hwmonErrors are the hwmon read errors of one device.
func hwmonErrors(s *diagnose.Reading, name string) []error {
	var out []error
	for _, err := range s.Hwmon().Errors {
		if strings.Contains(sysattr.ErrorPath(err), "/infiniband/"+name+"/") {
			out = append(out, err)
		}
	}
	return out
}
