// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/internal/read/cpulist"
)

// SysctlDropIn is the persistent file of the sysctl action.
const SysctlDropIn = "etc/sysctl.d/90-rdma-doctor.conf"

const dropInHeader = "# Written by rdma_doctor remediate; `rdma_doctor remediate rollback` removes it.\n"

// sysctlAction raises the socket and backlog sysctls to the policy's
// minimums (diagnose.policies.sysctls): the runtime value in /proc/sys and
// the same value in a drop-in, so it survives a reboot.
type sysctlAction struct{}

func (sysctlAction) ID() string       { return "sysctl" }
func (sysctlAction) Checks() []string { return []string{"sysctl.net"} }

func (a sysctlAction) Plan(in *Input) ([]Change, []string, error) {
	tun, err := in.Snap.Host.Tuning()
	if tun == nil {
		return nil, nil, fmt.Errorf("tuning state unreadable: %v", err)
	}
	// Same scope as the check: these tune sockets and IPoIB, not verbs.
	ipoib := 0
	if nd, _ := in.Snap.Host.Netdevs(); nd != nil {
		for _, n := range nd.Netdevs {
			if n.IPoIB != nil {
				ipoib++
			}
		}
	}
	if ipoib == 0 {
		return nil, []string{"nothing to do: no IPoIB netdev (these sysctls tune sockets and IPoIB, not verbs)"}, nil
	}
	mins := in.Config.Diagnose.Policies.SysctlMinimums()
	names := make([]string, 0, len(mins))
	for k := range mins {
		names = append(names, k)
	}
	sort.Strings(names)

	cur, exists, err := readOptional(in.W, AreaRoot, SysctlDropIn)
	if err != nil {
		return nil, nil, err
	}
	persisted := parseSysctlConf(cur)
	var out, runtime []Change
	var notes []string
	want := map[string]int64{}
	for _, name := range names {
		v, read := tun.Sysctl(name)
		if !read || !v.OK || len(v.V) == 0 {
			notes = append(notes, name+": cannot read its current value; not changed")
			continue
		}
		if v.V[0] < mins[name] {
			runtime = append(runtime, Change{Action: a.ID(), Check: "sysctl.net", Target: name, Area: AreaProc,
				Path: "sys/" + strings.ReplaceAll(name, ".", "/"), Current: strconv.FormatInt(v.V[0], 10) + "\n", Exists: true,
				Desired: strconv.FormatInt(mins[name], 10) + "\n", InPlace: true})
			want[name] = mins[name]
		}
		if p, ok := persisted[name]; ok && p < mins[name] {
			want[name] = mins[name]
		}
	}
	if len(want) > 0 {
		for k, v := range persisted {
			if _, ok := want[k]; !ok {
				want[k] = v
			}
		}
		values := make(map[string]string, len(want))
		for k, v := range want {
			values[k] = strconv.FormatInt(v, 10)
		}
		if c := dropInChange(a.ID(), "sysctl.net", SysctlDropIn, cur, exists, sysctlConf(values)); c != nil {
			out = append(out, *c)
		}
	}
	out = append(out, runtime...)
	if len(out) == 0 {
		notes = append(notes, "nothing to do: every sysctl is at or above its minimum")
	}
	return out, notes, nil
}

// parseSysctlConf reads the action's own drop-in (key = value lines).
func parseSysctlConf(s string) map[string]int64 {
	m := map[string]int64{}
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			m[strings.TrimSpace(k)] = n
		}
	}
	return m
}

// sysctlConf renders a sysctl.d drop-in of remediate's own: the header,
// then one "key = value" line per key, sorted.
func sysctlConf(values map[string]string) string {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(dropInHeader)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", k, values[k])
	}
	return b.String()
}

// dropInChange is the change that makes one of remediate's own files
// (below the root) read desired, or nil when it already does.
func dropInChange(action, check, path, cur string, exists bool, desired string) *Change {
	if exists && cur == desired {
		return nil
	}
	return &Change{Action: action, Check: check, Target: "/" + path, Area: AreaRoot, Path: path, Current: cur, Exists: exists, Desired: desired}
}

func readOptional(w Writer, a Area, name string) (string, bool, error) {
	b, err := w.ReadFile(a, name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return string(b), true, nil
}

// governorAction sets every online CPU's cpufreq governor to the policy's
// (performance by default). Runtime only: persisting it is the job of a
// tuned profile or the distribution's cpupower service, named in a note.
type governorAction struct{}

func (governorAction) ID() string       { return "cpu-governor" }
func (governorAction) Checks() []string { return []string{"cpu.governor"} }

func (a governorAction) Plan(in *Input) ([]Change, []string, error) {
	tun, err := in.Snap.Host.Tuning()
	if tun == nil {
		return nil, nil, fmt.Errorf("tuning state unreadable: %v", err)
	}
	want := in.Config.Diagnose.Policies.Governor()
	if len(tun.Governors) == 0 {
		return nil, []string{"nothing to do: no CPU has cpufreq (a VM, or no cpufreq driver)"}, nil
	}
	var out []Change
	var notes []string
	for _, g := range tun.Governors {
		if g.Governor == want {
			continue
		}
		dir := "devices/system/cpu/cpu" + strconv.Itoa(g.CPU) + "/cpufreq/"
		// scaling_available_governors is a plain word list no reader
		// parses; a governor the driver lacks would fail the write.
		if av, ok, err := readOptional(in.W, AreaSys, dir+"scaling_available_governors"); err == nil && ok {
			found := false
			for _, f := range strings.Fields(av) {
				found = found || f == want
			}
			if !found {
				notes = append(notes, fmt.Sprintf("cpu%d: the cpufreq driver offers no %q governor (%s); not changed", g.CPU, want, strings.TrimSpace(av)))
				continue
			}
		}
		out = append(out, Change{Action: a.ID(), Check: "cpu.governor", Target: "cpu" + strconv.Itoa(g.CPU), Area: AreaSys,
			Path: dir + "scaling_governor", Current: g.Governor + "\n", Exists: true, Desired: want + "\n", InPlace: true})
	}
	if len(out) == 0 && len(notes) == 0 {
		notes = append(notes, "nothing to do: every CPU runs "+want)
	}
	if len(out) > 0 {
		notes = append(notes, "runtime only: persist it with a tuned profile (tuned-adm profile latency-performance) or cpupower.service; the BIOS power profile (C-states) matters as much")
	}
	return out, notes, nil
}

// irqAction spreads each RDMA device's completion IRQs round-robin over
// the CPUs of its local_cpulist, one CPU per IRQ. The async/command
// vectors are left alone (Completion() excludes them).
type irqAction struct{}

func (irqAction) ID() string       { return "irq-affinity" }
func (irqAction) Checks() []string { return []string{"irq.local", "irq.spread"} }

// IrqbalanceNote tells the operator how to keep irqbalance from undoing
// the pinning.
const IrqbalanceNote = "irqbalance rewrites smp_affinity periodically: stop it (systemctl disable --now irqbalance) or ban these IRQs " +
	"(IRQBALANCE_ARGS=\"--banirq=N ...\" in /etc/sysconfig/irqbalance or /etc/default/irqbalance), else it undoes this; " +
	"the pinning is runtime only and is lost at reboot or driver reload"

func (a irqAction) Plan(in *Input) ([]Change, []string, error) {
	placement, err := in.Snap.Host.Placement()
	if placement == nil {
		return nil, nil, fmt.Errorf("IRQ placement unreadable: %v", err)
	}
	var out []Change
	var notes []string
	judged := 0 // devices whose completion IRQs were seen and compared
	for i := range placement.Devices {
		d := &placement.Devices[i]
		comp := d.Completion()
		switch {
		case d.Unclassified > 0:
			// Not "no IRQs": IRQs whose names say nothing about what they
			// carry; pinning a guess could move the control vectors.
			notes = append(notes, fmt.Sprintf("%s: %d of its %d IRQs have names in no form rdma_doctor knows, so which are completion vectors "+
				"is unknown; not changed (see grep %s /proc/interrupts, pin by hand if needed, and report the naming)",
				d.Name, d.Unclassified, len(d.IRQs), d.PCI.Address))
			continue
		case !d.Keyed() || len(comp) == 0:
			continue
		case d.Incomplete:
			notes = append(notes, d.Name+": its IRQ list is incomplete (a torn /proc/interrupts line); not changed")
			continue
		case !d.PCI.LocalCPUs.OK || d.PCI.LocalCPUs.V.Empty():
			notes = append(notes, d.Name+": local_cpulist unreadable; not changed")
			continue
		}
		judged++
		off, okOff := d.OffNode()
		used, okUsed := d.CPUsUsed()
		if !okOff || !okUsed {
			notes = append(notes, d.Name+": the affinity of a completion IRQ cannot be read; not changed")
			continue
		}
		if off == 0 && (len(comp) <= 1 || used.Len() > 1) {
			continue
		}
		local := d.PCI.LocalCPUs.V.CPUs()
		for k, q := range comp {
			cpu := local[k%len(local)]
			if q.Affinity.V.Equal(cpulist.Of(cpu)) {
				continue // already there (the kernel may not have moved it yet)
			}
			out = append(out, Change{Action: a.ID(), Check: "irq.local", Target: fmt.Sprintf("%s irq %d", d.Name, q.Number), Area: AreaProc,
				Path: "irq/" + strconv.Itoa(q.Number) + "/smp_affinity_list", Current: q.Affinity.V.String() + "\n", Exists: true,
				Desired: strconv.Itoa(cpu) + "\n", InPlace: true})
		}
	}
	if len(out) > 0 {
		notes = append(notes, IrqbalanceNote)
	} else if len(notes) == 0 && judged == 0 {
		// Not "all is well": efa, irdma, bnxt_re hosts without their IRQ
		// rows, soft devices without any; nothing was compared.
		notes = append(notes, "nothing to do: no line of /proc/interrupts is a completion IRQ of an RDMA device, so none is pinned")
	} else if len(notes) == 0 {
		notes = append(notes, "nothing to do: every device's completion IRQs are on its local CPUs and spread")
	}
	return out, notes, nil
}
