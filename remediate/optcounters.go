// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/rdmanl"
)

// OptionalCountersRule is the persistent file of the rdma-optional-counters
// action: a udev rule that sets each port's optional counters whenever its
// device appears (boot, driver reload) or is renamed.
const OptionalCountersRule = "etc/udev/rules.d/90-rdma-doctor-optional-counters.rules"

// RDMATool is the iproute2 `rdma` command the rule runs. udev wants an
// absolute path; /usr/sbin/rdma is where RHEL and every merged-/usr
// distribution (Debian 12, Ubuntu 22.04 and later) install it.
const RDMATool = "/usr/sbin/rdma"

// Counters is the running kernel's optional counters of a port, through
// NETLINK_RDMA: what AreaRDMA reads and writes. nil where the tree read is
// not the running kernel's (a fixture or a copy).
type Counters interface {
	// Status is the port's counter table with which optional counters
	// are enabled.
	Status(device string, port uint32) (rdmanl.PortStatus, error)
	// Set makes enabled exactly the port's enabled optional counters.
	Set(device string, port uint32, enabled []string) error
}

// KernelCounters is Counters on a netlink connection, each call bounded
// by Timeout (rdmanl.DefaultTimeout when zero) per request.
type KernelCounters struct {
	Conn    rdmanl.Conn
	Timeout time.Duration
}

func (k KernelCounters) ctx() (context.Context, context.CancelFunc) {
	t := k.Timeout
	if t <= 0 {
		t = rdmanl.DefaultTimeout
	}
	// A set is three requests and a read back; each is bounded by the
	// connection, the whole by four of them.
	return context.WithTimeout(context.Background(), 4*t)
}

// Status implements Counters.
func (k KernelCounters) Status(device string, port uint32) (rdmanl.PortStatus, error) {
	ctx, cancel := k.ctx()
	defer cancel()
	return rdmanl.ReadCounterStatus(ctx, k.Conn, device, port)
}

// Set implements Counters.
func (k KernelCounters) Set(device string, port uint32, enabled []string) error {
	ctx, cancel := k.ctx()
	defer cancel()
	return rdmanl.SetOptionalCounters(ctx, k.Conn, device, port, enabled)
}

// AreaRDMA paths are DEVICE/PORT; the "content" of one is its enabled
// optional counters, sorted and comma-separated as `rdma statistic mode`
// prints them, or "none", and a newline. The journal keeps that line and
// rollback writes it back, which sets exactly that set again.
const noCounters = "none"

// countersPath is the AreaRDMA path of a port.
func countersPath(device string, port uint32) string {
	return device + "/" + strconv.FormatUint(uint64(port), 10)
}

// parseCountersPath splits DEVICE/PORT.
func parseCountersPath(name string) (string, uint32, error) {
	dev, p, ok := strings.Cut(name, "/")
	port, err := strconv.ParseUint(p, 10, 32)
	if !ok || dev == "" || strings.Contains(p, "/") || err != nil || port == 0 {
		return "", 0, fmt.Errorf("%s:%s: not a DEVICE/PORT", AreaRDMA, name)
	}
	return dev, uint32(port), nil
}

// countersLine renders a set of counter names.
func countersLine(names []string) string {
	if len(names) == 0 {
		return noCounters + "\n"
	}
	s := append([]string(nil), names...)
	sort.Strings(s)
	return strings.Join(s, ",") + "\n"
}

// parseCountersLine reads what countersLine wrote.
func parseCountersLine(b []byte) ([]string, error) {
	s := strings.TrimSpace(string(b))
	if s == noCounters || s == "" {
		return nil, nil
	}
	names := strings.Split(s, ",")
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, " \t\n") {
			return nil, fmt.Errorf("%q is not a list of counter names", s)
		}
	}
	return names, nil
}

// errNotLive is the error of AreaRDMA on a writer without the kernel.
var errNotLive = errors.New("the optional counters are the running kernel's: this tree is not the running kernel's /sys")

func (w DirWriter) readCounters(name string) ([]byte, error) {
	if w.Counters == nil {
		return nil, errNotLive
	}
	dev, port, err := parseCountersPath(name)
	if err != nil {
		return nil, err
	}
	st, err := w.Counters.Status(dev, port)
	if err != nil {
		return nil, err
	}
	_, enabled := st.Optional()
	return []byte(countersLine(enabled)), nil
}

func (w DirWriter) countersExist(name string) (bool, error) {
	_, err := w.readCounters(name)
	if errors.Is(err, rdmanl.ErrNoDevice) {
		return false, nil
	}
	return err == nil, err
}

func (w DirWriter) writeCounters(name string, data []byte) error {
	if w.Counters == nil {
		return errNotLive
	}
	dev, port, err := parseCountersPath(name)
	if err != nil {
		return err
	}
	names, err := parseCountersLine(data)
	if err != nil {
		return fmt.Errorf("%s:%s: %w", AreaRDMA, name, err)
	}
	return w.Counters.Set(dev, port, names)
}

// optionalCountersAction enables the optional counters of
// tuning.optional_counters on every port that offers them: at runtime
// through RDMA netlink (the union of what is enabled and what is asked,
// since the kernel replaces the whole set), and in a udev rule, since the
// kernel forgets them when the device goes.
type optionalCountersAction struct{}

func (optionalCountersAction) ID() string { return "rdma-optional-counters" }

// Checks is empty: no check fails for a counter that is off; the config
// asks for them (ECN and CNP counts for the RoCE lossless audit).
func (optionalCountersAction) Checks() []string { return []string{} }

// portCounters is what the action wants on one port.
type portCounters struct {
	device string
	port   uint32
	want   []string
}

func (a optionalCountersAction) Plan(in *Input) ([]Change, []string, error) {
	asked := in.Config.Tuning.OptionalCounters
	if len(asked) == 0 {
		return nil, []string{"nothing to do: tuning.optional_counters names no counter"}, nil
	}
	class, err := in.Snap.Host.Class()
	if class == nil {
		return nil, nil, fmt.Errorf("RDMA devices unreadable: %v", err)
	}
	var ports []portCounters
	var runtime []Change
	var notes []string
	if in.Counters == nil {
		// No kernel to ask which ports offer them or what is on: the rule
		// names every port, and the plan says the runtime part is skipped.
		for _, d := range class.Devices {
			for _, p := range d.Ports {
				ports = append(ports, portCounters{d.Name, uint32(p.Num), sortedCopy(asked)})
			}
		}
		if len(ports) > 0 {
			notes = append(notes, "runtime part skipped: this tree is not the running kernel's /sys (a fixture or a copy), so RDMA netlink is not asked "+
				"which ports offer "+strings.Join(asked, ",")+" or which are on; only the udev rule is written, for every port, and it takes effect "+
				"when each device next appears (boot, driver reload); on a port without one of them the rule's rdma command fails and changes nothing")
		}
	} else {
		for _, d := range class.Devices {
			for _, p := range d.Ports {
				pc, ch, note := a.planPort(in.Counters, d.Name, uint32(p.Num), asked)
				if note != "" {
					notes = append(notes, note)
				}
				if pc != nil {
					ports = append(ports, *pc)
				}
				if ch != nil {
					runtime = append(runtime, *ch)
				}
			}
		}
	}
	if len(ports) == 0 {
		if len(notes) == 0 {
			notes = append(notes, "nothing to do: no RDMA port")
		}
		return nil, notes, nil
	}
	cur, exists, err := readOptional(in.W, AreaRoot, OptionalCountersRule)
	if err != nil {
		return nil, nil, err
	}
	var out []Change
	if c := dropInChange(a.ID(), "", OptionalCountersRule, cur, exists, udevRules(ports, cur)); c != nil {
		out = append(out, *c)
	}
	out = append(out, runtime...)
	switch {
	case len(out) > 0:
		notes = append(notes, "the udev rule runs "+RDMATool+" (iproute2 5.16 or later) when a device appears or is renamed; udevd reads changed rules by itself")
	case in.Counters == nil:
		notes = append(notes, "nothing to do: the udev rule already sets "+strings.Join(asked, ",")+" on every port")
	default:
		notes = append(notes, "nothing to do: every port that offers them has "+strings.Join(asked, ",")+" on, and the udev rule says so")
	}
	return out, notes, nil
}

// planPort plans one port on the running kernel: nil when the port is not
// planned (the note says why), and the runtime change when the enabled set
// lacks some of what is asked.
func (a optionalCountersAction) planPort(k Counters, dev string, port uint32, asked []string) (*portCounters, *Change, string) {
	target := countersPath(dev, port)
	st, err := k.Status(dev, port)
	switch st := rdmanl.Classify(err); {
	case err == nil:
	case errors.Is(err, rdmanl.ErrNoDevice):
		return nil, nil, target + ": gone from RDMA netlink since the device list was read; not changed"
	case st == rdmanl.StatusUnsupported:
		return nil, nil, target + ": the kernel reports no optional counters for it (RDMA_NLDEV_CMD_STAT_GET_STATUS unsupported: an older kernel, or a port without hardware counters); not changed"
	default:
		return nil, nil, fmt.Sprintf("%s: cannot read its optional counters (%v); not changed", target, err)
	}
	offered, enabled := st.Optional()
	has := map[string]bool{}
	for _, n := range offered {
		has[n] = true
	}
	var missing []string
	want := append([]string(nil), enabled...)
	on := map[string]bool{}
	for _, n := range enabled {
		on[n] = true
	}
	for _, n := range asked {
		switch {
		case !has[n]:
			missing = append(missing, n)
		case !on[n]:
			want = append(want, n)
		}
	}
	sort.Strings(want)
	if len(missing) == len(asked) {
		return nil, nil, fmt.Sprintf("%s: offers none of %s as an optional counter (it offers: %s); not changed", target, strings.Join(asked, ","), orNone(offered))
	}
	note := ""
	if len(missing) > 0 {
		note = fmt.Sprintf("%s: offers no optional counter %s (it offers: %s); the others are enabled", target, strings.Join(missing, ","), orNone(offered))
	}
	pc := &portCounters{dev, port, want}
	if len(want) == len(enabled) {
		return pc, nil, note
	}
	return pc, &Change{Action: a.ID(), Target: target, Area: AreaRDMA, Path: target,
		Current: countersLine(enabled), Exists: true, Desired: countersLine(want), InPlace: true}, note
}

func orNone(names []string) string {
	if len(names) == 0 {
		return noCounters
	}
	return strings.Join(names, ",")
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// udevRuleLine is the rule of one port. KERNEL matches the device's name
// as the kernel registers it ("add") and as a rename leaves it ("move":
// rdma-core's persistent naming renames devices during their add event);
// %k is that name. The counter names are letters, digits and '_' only
// (internal/host/config checks), so the command needs no quoting.
func udevRuleLine(p portCounters) string {
	return fmt.Sprintf(`ACTION=="add|move", SUBSYSTEM=="infiniband", KERNEL=="%s", RUN+="%s statistic set link %%k/%d optional-counters %s"`,
		p.device, RDMATool, p.port, strings.Join(p.want, ","))
}

// udevRuleKey is the device and port a line of the rule file is about, as
// udevRuleLine writes them; ok false for any other line.
func udevRuleKey(line string) (string, bool) {
	_, rest, ok := strings.Cut(line, `KERNEL=="`)
	if !ok || !strings.HasPrefix(line, "ACTION==") {
		return "", false
	}
	dev, rest, ok := strings.Cut(rest, `"`)
	if !ok {
		return "", false
	}
	_, rest, ok = strings.Cut(rest, "%k/")
	if !ok {
		return "", false
	}
	port, _, ok := strings.Cut(rest, " ")
	return dev + "/" + port, ok
}

// udevRules renders the rule file: the header, then one line per port,
// sorted; a port the current file has a line for and this plan does not
// (a device absent now) keeps its line.
func udevRules(ports []portCounters, cur string) string {
	lines := map[string]string{}
	for _, l := range strings.Split(cur, "\n") {
		if k, ok := udevRuleKey(l); ok {
			lines[k] = l
		}
	}
	for _, p := range ports {
		lines[countersPath(p.device, p.port)] = udevRuleLine(p)
	}
	keys := make([]string, 0, len(lines))
	for k := range lines {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(dropInHeader)
	b.WriteString("# Optional RDMA counters (tuning.optional_counters): the kernel keeps them off until asked and forgets them\n" +
		"# when the device goes. Each line sets a port's whole set, as `rdma statistic set` replaces it.\n")
	for _, k := range keys {
		b.WriteString(lines[k])
		b.WriteByte('\n')
	}
	return b.String()
}
