// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package link

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sff"
)

// ModuleChecks registers the checks of module.go; checks.All lists every concern's.
func ModuleChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{
		ID:    "port.module",
		Title: "Transceiver temperature and Rx power within the module's own thresholds",
		Reads: []diagnose.Source{diagnose.SourceNetdev, diagnose.SourceModule},
		Doc: "The digital diagnostics in the transceiver memory of each RoCE netdev's port (SFF-8472, SFF-8636, CMIS; read " +
			"with --collector.netdev.module-eeprom, netdevs of the running kernel only), judged against the module's own " +
			"thresholds and nothing else: a temperature at or above the module's high warning threshold warns, at or above " +
			"its high alarm fails; a lane's received power at or below the low warning threshold warns, at or below the low " +
			"alarm fails (a spare port's lanes, dark by design, are not judged). A module whose memory was not read (no " +
			"CAP_NET_ADMIN, a driver or kernel without module access, an empty cage), one without monitors (no DDM, copper) " +
			"and one without thresholds (or with unprogrammed, all-zero ones) skips with the reason.",
		Remedy: "Hot module: check the cage's airflow and fans, reseat the module, replace one that runs hot in a cooled slot. " +
			"Low Rx power: clean the fiber connectors at both ends, reseat module and cable, check the far end's Tx power " +
			"(the switch's transceiver diagnostics), replace the optic or the fiber.",
		Run: checkModule,
	})
}

// moduleReasonText says why a module's memory was not read, by reason.
var moduleReasonText = map[string]string{
	netdev.ModuleReasonPermission:  "reading the module memory needs CAP_NET_ADMIN (ethtool netlink MODULE_EEPROM_GET)",
	netdev.ModuleReasonUnsupported: "the kernel (before 5.13) or the driver cannot read the module memory",
	netdev.ModuleReasonIO:          "the driver could not read the module: an empty cage, or a module that does not answer",
	netdev.ModuleReasonUnknown:     "byte 0 of the module memory names a module type that is not decoded (0x00: often an empty cage)",
	netdev.ModuleReasonError:       "the module memory could not be decoded (the collection error is logged)",
}

// moduleAbsentText says why a module has no monitors, by sff.Absent*.
var moduleAbsentText = map[string]string{
	sff.AbsentNoDDM:       "the module implements no digital diagnostics (SFF-8472 byte 92)",
	sff.AbsentExternalCal: "the module's diagnostics are externally calibrated, which is not decoded",
	sff.AbsentCopper:      "a copper cable: no optical lane monitors",
	sff.AbsentFlat:        "a flat-memory CMIS module: no monitor pages",
	sff.AbsentNotReady:    "the module says its monitors are not ready (SFF-8636 Data_Not_Ready)",
}

func checkModule(s *diagnose.Reading, _ *diagnose.History, cfg *config.Config) ([]diagnose.Finding, error) {
	var out []diagnose.Finding
	for i := range s.Netdev().Netdevs {
		n := &s.Netdev().Netdevs[i]
		// The reader asks only RoCE and iWARP netdevs of a kept RDMA port that the
		// running kernel has; the others have no reading to judge.
		if !n.Ethernet() || n.Module == nil {
			continue
		}
		out = append(out, judgeModule(s, cfg, n))
	}
	if len(out) == 0 {
		return kit.NoTargets("no RoCE or iWARP netdev's transceiver memory was read: only the netdevs of the running kernel that map to " +
			"an RDMA port are asked (not on a fixture tree, not from a pod without the host network)"), nil
	}
	return out, nil
}

// judgeModule judges one netdev's module: the worst reading decides.
func judgeModule(s *diagnose.Reading, cfg *config.Config, n *netdev.Netdev) diagnose.Finding {
	me := n.Module
	f := diagnose.Finding{Target: n.Name, Severity: diagnose.Skip, Evidence: "ethtool -m " + n.Name + " (module memory: "}
	m := me.Module
	if m == nil {
		why, ok := moduleReasonText[me.Reason]
		if !ok {
			why = "not read (" + me.Reason + ")"
		}
		f.Evidence = "the transceiver memory of " + n.Name + " was not read: " + why
		return f
	}
	f.Evidence += moduleName(m) + ")"
	if me.Reason != "" {
		f.Evidence += "; partly read: " + me.Reason
	}
	where := n.Name
	mlx := "ethtool -m " + n.Name
	var spare *diagnose.Finding
	if d, p := netdevPort(s, n); d != nil {
		where = fmt.Sprintf("%s (%s port %d)", n.Name, d.Name, p.Num)
		mlx = kit.LinkTool(d, p, "-m", "-m")
		if !portActive(p) {
			if sp, ok := sparePort(s, cfg, d, p, diagnose.Finding{}); ok {
				spare = &sp
			}
		}
	}
	look := "ethtool -m " + n.Name
	if mlx != look {
		look += "; " + mlx
	}

	var th sff.Thresholds
	if m.Thresholds != nil {
		th = *m.Thresholds
	}
	var obs, expected, remedies, unjudged []string
	judge := func(sev diagnose.Severity) {
		if sev.Worse(f.Severity) {
			f.Severity = sev
		}
	}

	// Temperature, against the high side of the module's limits.
	tl, tOK := usableLimits(th.Temperature)
	switch {
	case !m.Temperature.OK:
		unjudged = append(unjudged, "no temperature monitor")
	case !tOK:
		obs = append(obs, "temperature "+celsius(round2(m.Temperature.V)))
		unjudged = append(unjudged, "no usable temperature thresholds"+limitsNote(th.Temperature))
	default:
		t := m.Temperature.V
		obs = append(obs, fmt.Sprintf("temperature %s (high warning %s, high alarm %s)", celsius(round2(t)), celsius(tl.HighWarning), celsius(tl.HighAlarm)))
		expected = append(expected, "temperature below the module's high warning threshold ("+celsius(tl.HighWarning)+")")
		sev, limit := diagnose.Pass, ""
		switch {
		case t >= tl.HighAlarm:
			sev, limit = diagnose.Fail, "its high alarm "+celsius(tl.HighAlarm)
		case t >= tl.HighWarning:
			sev, limit = diagnose.Warn, "its high warning "+celsius(tl.HighWarning)
		}
		judge(sev)
		if sev != diagnose.Pass {
			remedies = append(remedies, fmt.Sprintf("the module of %s runs at %s, at or above %s: check the cage's airflow and "+
				"the fans, reseat the module, replace a module that runs hot in a cooled slot (%s)", where, celsius(round2(t)), limit, look))
		}
	}

	// Rx power per lane, against the low side of the module's limits.
	rl, rOK := usableLimits(th.RxPower)
	var lanes []string
	rxMonitored := false
	for i, l := range m.Lanes {
		if l.RxPower.OK {
			rxMonitored = true
			lanes = append(lanes, fmt.Sprintf("lane %d %s", i+1, powerText(l.RxPower.V)))
		}
	}
	switch {
	case !rxMonitored:
		why := "no Rx power monitor"
		if t, ok := moduleAbsentText[m.Absent]; ok {
			why += ": " + t
		}
		unjudged = append(unjudged, why)
	case !rOK:
		obs = append(obs, "Rx power "+strings.Join(lanes, ", "))
		unjudged = append(unjudged, "no usable Rx power thresholds"+limitsNote(th.RxPower))
	case spare != nil:
		obs = append(obs, "Rx power "+strings.Join(lanes, ", "))
		unjudged = append(unjudged, "Rx power not judged on a spare port"+strings.TrimPrefix(spare.Evidence, "; a spare port"))
	default:
		obs = append(obs, fmt.Sprintf("Rx power %s (low warning %s, low alarm %s)", strings.Join(lanes, ", "), powerText(rl.LowWarning), powerText(rl.LowAlarm)))
		expected = append(expected, "Rx power of every lane above the module's low warning threshold ("+powerText(rl.LowWarning)+")")
		for i, l := range m.Lanes {
			if !l.RxPower.OK {
				continue
			}
			sev, limit := diagnose.Pass, ""
			switch p := l.RxPower.V; {
			case p <= rl.LowAlarm:
				sev, limit = diagnose.Fail, "its low alarm "+powerText(rl.LowAlarm)
			case p <= rl.LowWarning:
				sev, limit = diagnose.Warn, "its low warning "+powerText(rl.LowWarning)
			}
			judge(sev)
			if sev != diagnose.Pass {
				remedies = append(remedies, fmt.Sprintf("lane %d of %s receives %s, at or below %s: clean the fiber connectors at "+
					"both ends, reseat the module and the cable, check the far end's Tx power (the switch's or peer's "+
					"transceiver diagnostics), replace the optic or the fiber if it stays low (%s)", i+1, where, powerText(l.RxPower.V), limit, look))
			}
		}
	}

	f.Observed = strings.Join(obs, "; ")
	f.Expected = strings.Join(expected, "; ")
	f.Remedy = strings.Join(remedies, "; ")
	if len(unjudged) > 0 {
		f.Evidence += "; not judged: " + strings.Join(unjudged, "; ")
	}
	if f.Severity == diagnose.Skip {
		// Nothing to judge is a skip with the reason, not a pass.
		f.Evidence = "nothing to judge on the module of " + n.Name + " (" + moduleName(m) + "): " + strings.Join(unjudged, "; ")
		if me.Reason != "" {
			f.Evidence += "; partly read: " + me.Reason
		}
	}
	return f
}

// usableLimits returns limits that can be judged: ordered as the specs
// define them. An unprogrammed module reads all zero, which would make
// every dark lane an alarm.
func usableLimits(o sff.Opt[sff.Limits]) (sff.Limits, bool) {
	l := o.V
	return l, o.OK && l.LowAlarm <= l.LowWarning && l.LowWarning < l.HighWarning && l.HighWarning <= l.HighAlarm
}

// limitsNote says why limits that are there cannot be used.
func limitsNote(o sff.Opt[sff.Limits]) string {
	if !o.OK {
		return ""
	}
	l := o.V
	return fmt.Sprintf(" (not ordered low alarm ≤ low warning < high warning ≤ high alarm: %g, %g, %g, %g)", l.LowAlarm, l.LowWarning, l.HighWarning, l.HighAlarm)
}

// moduleName is the module as evidence names it: "cmis osfp, JUNIPER-... 740-174932".
func moduleName(m *sff.Module) string {
	t := string(m.Spec) + " " + m.Identifier.String()
	if id := strings.TrimSpace(m.Vendor + " " + m.PartNumber); id != "" {
		t += ", " + id
	}
	return t
}

// powerText is an optical power as operators read it: milliwatts and dBm.
func powerText(w float64) string {
	mw := w * 1e3
	if mw <= 0 {
		return "0 mW (no light)"
	}
	return strconv.FormatFloat(round4(mw), 'f', -1, 64) + " mW (" + strconv.FormatFloat(math.Round(10*math.Log10(mw)*100)/100, 'f', -1, 64) + " dBm)"
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }
func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }
