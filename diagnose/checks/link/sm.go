// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package link

import (
	"fmt"
	"strings"
	"time"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/opensm"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sm"
)

// capIsSM is the IsSM bit of PortInfo:CapabilityMask (cap_mask): this port
// runs a subnet manager.
const capIsSM = 1 << 1

// SMChecks registers the checks of sm.go; checks.All lists every concern's.
func SMChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{
		ID:    "sm.present",
		Title: "Subnet manager has swept the port",
		Reads: []diagnose.Source{diagnose.SourceInfiniband},
		Doc: "An InfiniBand port with its link up is ACTIVE with a non-zero sm_lid. LinkUp but INIT, or SM LID 0, " +
			"means no working subnet manager on the fabric. RoCE and iWARP ports have no SM and are not judged.",
		Remedy: "Run one subnet manager per fabric: switch-embedded, UFM, or opensm (systemctl enable --now opensm) on a stable host.",
		Run:    checkSMPresent,
	})
	l.Register(&diagnose.Check{
		ID:    "sm.master",
		Title: "Subnet manager is master and alive",
		Reads: []diagnose.Source{diagnose.SourceSM},
		Doc: "sminfo (run for each ACTIVE InfiniBand port, needs ib_umad) reports the SM the port points at in state SMINFO_MASTER, " +
			"and its activity count rises between runs (a count that stops means a hung SM: warn). DISCOVERING or STANDBY warns; " +
			"an SM that cannot be resolved fails; no sminfo binary skips.",
		Remedy: "Inspect the SM host (opensm log, systemctl status opensm, or the switch/UFM SM); fail over to a standby SM.",
		Run:    checkSMMaster,
	})
	l.Register(&diagnose.Check{
		ID:    "sm.local",
		Title: "Local OpenSM configuration",
		Reads: []diagnose.Source{diagnose.SourceOpenSM, diagnose.SourceInfiniband},
		Doc: "Where this host runs OpenSM (a process in /proc): it sweeps (sweep_interval not 0), and on a host with more than one " +
			"InfiniBand port it is bound to a port (-g, guid in opensm.conf, or GUIDS/PORTS in the init scripts' file) rather than " +
			"the \"default port\". Its priority is reported; whether it is unique is a fabric question this host cannot see. " +
			"Secret options (*_key) are never read into a finding. The end of its log (-f, log_file, or /var/log/opensm.log) adds its state, " +
			"the last SUBNET UP and numbered ERR lines; a master that has logged no SUBNET UP for 5 minutes since it became master warns " +
			"(its heavy sweep does not finish). Hosts without a running opensm skip.",
		Remedy: "Set guid (or PORTS/GUIDS in /etc/default/opensm or /etc/sysconfig/opensm), a non-zero sweep_interval and a distinct sm_priority.",
		Run:    checkSMLocal,
	})
}

func checkSMPresent(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	var out []diagnose.Finding
	ibPorts := 0
	kit.ForEachPort(s, func(d *infiniband.Device, p *infiniband.Port) {
		// iWARP devices on old kernels print link_layer InfiniBand; they
		// have no SM either.
		if kit.IsRNIC(d) || !sm.IsInfiniBand(p) {
			if !p.LinkLayer.OK && kit.FileErr(d, fmt.Sprintf("ports/%d/link_layer", p.Num)) != nil {
				out = append(out, kit.Unreadable(kit.PortTarget(d, p), d, fmt.Sprintf("ports/%d/link_layer", p.Num)))
			}
			return
		}
		ibPorts++
		t := kit.PortTarget(d, p)
		if p.PhysState.OK && !kit.LinkUp(p) {
			out = append(out, diagnose.Finding{Severity: diagnose.Skip, Target: t, Evidence: "the link is not up (see port.phys): no SM can reach it"})
			return
		}
		has, ok := sm.PortHasSM(p)
		if !ok {
			rel := fmt.Sprintf("ports/%d/sm_lid", p.Num)
			if !p.PhysState.OK {
				rel = fmt.Sprintf("ports/%d/phys_state", p.Num)
			} else if !p.State.OK {
				rel = fmt.Sprintf("ports/%d/state", p.Num)
			}
			out = append(out, kit.Unreadable(t, d, rel))
			return
		}
		f := diagnose.Finding{Target: t, Observed: fmt.Sprintf("SM LID %d, state %s", p.SMLID.V, kit.EnumText(p.State.V)),
			Expected: "an SM LID other than 0 and state ARMED or ACTIVE (internal/read/sm.PortHasSM)",
			Evidence: fmt.Sprintf("/sys/class/infiniband/%s/ports/%d/{sm_lid,state}", d.Name, p.Num)}
		if p.CapMask.OK && p.CapMask.V&capIsSM != 0 {
			f.Evidence += "; cap_mask has IsSM: this port runs a subnet manager"
		}
		switch {
		case has:
			f.Severity = diagnose.Pass
		default:
			f.Severity = diagnose.Fail
			f.Remedy = fmt.Sprintf("no subnet manager has configured %s: check for a running SM (sminfo -C %s -P %d), start one "+
				"(switch-embedded SM, UFM, or systemctl enable --now opensm on one stable host of the fabric); an SM must be able to reach this port",
				t, d.Name, p.Num)
		}
		out = append(out, f)
	})
	if ibPorts == 0 {
		return kit.NoTargets("no InfiniBand ports: RoCE and iWARP have no subnet manager"), nil
	}
	return out, nil
}

func checkSMMaster(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	var out []diagnose.Finding
	for _, ps := range s.SMStatus().Ports {
		t := ps.Target.String()
		if !ps.OK {
			if sm.NotInstalled(ps.Err) {
				out = append(out, diagnose.Finding{Severity: diagnose.Skip, Target: t, Evidence: "sminfo is not installed (Debian/RHEL: infiniband-diags): " + ps.Err.Error()})
				continue
			}
			if sm.NoLocalAccess(ps.Err) {
				// sminfo never reached the fabric: a local problem, not
				// a missing SM (the sm.present check judges that).
				out = append(out, diagnose.Finding{Severity: diagnose.Skip, Target: t,
					Evidence: "sminfo cannot open the local port (no access to /dev/infiniband/umad*: not root, or ib_umad missing): " + ps.Err.Error()})
				continue
			}
			out = append(out, diagnose.Finding{Severity: diagnose.Fail, Target: t, Observed: "sminfo cannot resolve the SM",
				Expected: "an SM in state SMINFO_MASTER", Evidence: fmt.Sprintf("sminfo -C %s -P %d: %v", ps.Device, ps.Port, ps.Err),
				Remedy: fmt.Sprintf("the SM %s points at does not answer: check the SM host (systemctl status opensm, its log; or the switch/UFM SM) "+
					"and fail over to a standby; sm.present shows whether the port was ever swept", t)})
			continue
		}
		in := ps.Info
		f := diagnose.Finding{Target: t, Observed: fmt.Sprintf("SM LID %d GUID %s priority %d state %s, activity count %d", in.LID, in.GUID, in.Priority, in.State, in.ActivityCount),
			Expected: "state MASTER with a rising activity count", Evidence: fmt.Sprintf("sminfo -C %s -P %d", ps.Device, ps.Port), Severity: diagnose.Pass}
		switch {
		case in.State != sm.StateMaster:
			f.Severity = diagnose.Warn
			f.Remedy = fmt.Sprintf("the SM %s asks is %s, not MASTER: it is still sweeping (DISCOVERING) or a standby answered; run sminfo again, then check the master SM host", t, in.State)
		case ps.Stalled:
			f.Severity = diagnose.Warn
			f.Observed += " (not rising since the previous run)"
			f.Remedy = "the master SM answers but its activity count stopped: a hung sweep (or sweep_interval 0). Check its log and restart it or fail over"
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return kit.NoTargets("no ACTIVE InfiniBand port to run sminfo on"), nil
	}
	return out, nil
}

func checkSMLocal(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	st := s.OpenSM()
	if !st.Running() {
		return kit.NoTargets("no opensm process runs on this host (the subnet manager, if any, runs elsewhere)"), nil
	}
	ibPorts := 0
	kit.ForEachPort(s, func(d *infiniband.Device, p *infiniband.Port) {
		if kit.IsIBPort(d, p) {
			ibPorts++
		}
	})
	var conf = func(name string) (string, bool) { return "", false }
	confPath := "no opensm.conf found"
	if st.Config != nil {
		conf, confPath = st.Config.Get, st.Config.Path
	}
	shellGUIDs := ""
	for _, sh := range st.Shell {
		for _, k := range []string{"GUIDS", "PORTS"} {
			if v := sh.Values[k]; v != "" && !strings.EqualFold(v, "ALL") {
				shellGUIDs = sh.Path + " " + k + "=" + v
			}
		}
	}
	var out []diagnose.Finding
	for _, p := range st.Processes {
		// The target is stable across restarts (no PID): the process name,
		// and the port GUID it binds when it names one (Debian runs one
		// opensm per port). The PID is evidence.
		target := "opensm"
		if p.GUID != "" {
			target += " " + p.GUID
		}
		f := diagnose.Finding{Target: target, Severity: diagnose.Pass,
			Expected: "sweeping, bound to a port on a multi-port host", Evidence: "/proc/" + fmt.Sprint(p.PID) + "/cmdline; " + confPath}
		guid, where := p.GUID, "-g"
		if guid == "" {
			if g, ok := conf("guid"); ok {
				guid, where = g, "guid in "+confPath
			}
		}
		prio := "default 0"
		if p.Priority >= 0 {
			prio = fmt.Sprint(p.Priority)
		} else if v, ok := conf("sm_priority"); ok {
			prio = v
		}
		sweep, _ := conf("sweep_interval")
		obs := []string{"priority " + prio}
		if guid != "" {
			obs = append(obs, "bound to "+guid+" ("+where+")")
		}
		if sweep != "" {
			obs = append(obs, "sweep_interval "+sweep)
		}
		f.Observed = strings.Join(obs, ", ")
		var problems []string
		if sweep == "0" {
			problems = append(problems, "sweep_interval 0 disables sweeping: the SM never notices a link or node change")
		}
		unbound := guid == "" || strings.Trim(strings.TrimPrefix(strings.ToLower(guid), "0x"), "0") == ""
		if ibPorts > 1 && unbound && shellGUIDs == "" {
			problems = append(problems, fmt.Sprintf("no port GUID on a host with %d InfiniBand ports: opensm binds the \"default port\", maybe not the fabric's", ibPorts))
		}
		if shellGUIDs != "" {
			f.Evidence += "; " + shellGUIDs
		}
		if len(problems) > 0 {
			f.Severity = diagnose.Warn
			f.Remedy = strings.Join(problems, "; ") + ". Set guid (opensm -g, guid in opensm.conf, or GUIDS/PORTS in /etc/sysconfig/opensm or /etc/default/opensm) " +
				"and a non-zero sweep_interval, then restart opensm in a maintenance window (a restart re-sweeps the fabric)"
		}
		if l := st.LogOf(p); l != nil {
			judgeOpenSMLog(&f, l, s.Time)
		}
		out = append(out, f)
	}
	return out, nil
}

// stuckSweep is how long a master may go without SUBNET UP: a heavy sweep
// of a large fabric takes seconds to a minute.
const stuckSweep = 5 * time.Minute

// judgeOpenSMLog adds what the end of an opensm's log says: its state, the
// last SUBNET UP and numbered errors; a master that has logged no SUBNET UP
// for stuckSweep since it became master warns.
func judgeOpenSMLog(f *diagnose.Finding, l *opensm.Log, now time.Time) {
	ts := func(t time.Time) string { return t.In(now.Location()).Format("2006-01-02 15:04:05") }
	f.Evidence += "; " + l.Path
	var obs []string
	if l.State != "" {
		obs = append(obs, "log: "+l.State+" since "+ts(l.StateTime))
	}
	if l.SubnetUp.IsZero() {
		obs = append(obs, fmt.Sprintf("no SUBNET UP in the log (its last %d KiB when first read, and the lines added since)", opensm.LogTail>>10))
	} else {
		obs = append(obs, "last SUBNET UP "+ts(l.SubnetUp))
	}
	if l.Errors > 0 {
		obs = append(obs, fmt.Sprintf("%d ERR line(s), last at %s: %s", l.Errors, ts(l.LastErrorTime), l.LastError))
	}
	f.Observed += "; " + strings.Join(obs, ", ")
	if l.State == "MASTER" && l.SubnetUp.Before(l.StateTime) && now.Sub(l.StateTime) > stuckSweep {
		f.Severity = diagnose.Warn
		stuck := fmt.Sprintf("opensm became MASTER at %s and has logged no SUBNET UP since: its heavy sweep does not finish (read the ERR lines in %s; "+
			"a flapping link or an unresponsive switch is the usual cause; restarting opensm re-sweeps the fabric)", ts(l.StateTime), l.Path)
		f.Remedy = strings.TrimPrefix(f.Remedy+"; "+stuck, "; ")
	}
}
