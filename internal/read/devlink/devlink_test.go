// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package devlink

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// No recorded devlink netlink bytes are public: what bug reports and
// patches show is iproute2's rendering ("devlink health", "devlink dev
// info"). The messages below are built the way the kernel's
// devlink_nl_health_reporter_fill and devlink_nl_info_fill lay them out,
// from those REAL values:
//
//   - mlx5 info, both PFs of a ConnectX-7 (fw.psid MT_0000000894, running
//     and stored fw.version 28.41.1000): Jiri Pirko, "[PATCH net-next v2
//     2/4] net/mlx5: Expose serial numbers in devlink info", netdev,
//     2025-03-20.
//   - mlx5 info after a failed pending-image query (pci/0000:00:06.0,
//     fw.psid MT_0000000436, running 22.41.0188, stored 255.255.65535):
//     Saeed Mahameed, "net/mlx5: Avoid \"No data available\" when FW
//     version queries fail", commit 10dc35f6a443 (6.18 stable review,
//     2026-04-08).
//   - a fw reporter in error (pci/0000:07:00.0, state error error 7
//     recover 0): Jakub Kicinski, "devlink: add simple fw crash helpers",
//     netdev/ath10k, 2020.
//   - a device fw reporter and a port tx reporter (pci/0000:00:0a.0,
//     pci/0000:00:0a.0/1: state healthy error 0 recover 0 grace_period
//     500): Vladyslav Tarasiuk, "[PATCH net-next] devlink: Add health
//     reporters on devlink ports" cover letter, netdev, 2020.
//
// The mlx5 reporter names fw, fw_fatal, tx, rx and vnic are from
// Documentation/networking/devlink/mlx5.rst.

type reporterMsg struct {
	bus, dev           string
	port               *uint32
	name               string
	state              uint8
	errs, recs, graceP uint64
}

func (m reporterMsg) encode(t testing.TB) []byte {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.DEVLINK_ATTR_BUS_NAME, m.bus)
	ae.String(unix.DEVLINK_ATTR_DEV_NAME, m.dev)
	if m.port != nil {
		ae.Uint32(unix.DEVLINK_ATTR_PORT_INDEX, *m.port)
	}
	ae.Nested(unix.DEVLINK_ATTR_HEALTH_REPORTER, func(n *netlink.AttributeEncoder) error {
		n.String(unix.DEVLINK_ATTR_HEALTH_REPORTER_NAME, m.name)
		n.Uint8(unix.DEVLINK_ATTR_HEALTH_REPORTER_STATE, m.state)
		n.Uint64(unix.DEVLINK_ATTR_HEALTH_REPORTER_ERR_COUNT, m.errs)
		n.Uint64(unix.DEVLINK_ATTR_HEALTH_REPORTER_RECOVER_COUNT, m.recs)
		if m.graceP != 0 {
			n.Uint64(unix.DEVLINK_ATTR_HEALTH_REPORTER_GRACEFUL_PERIOD, m.graceP)
			n.Uint8(unix.DEVLINK_ATTR_HEALTH_REPORTER_AUTO_RECOVER, 1)
		}
		return nil
	})
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type infoMsg struct {
	bus, dev, driver       string
	fixed, running, stored []Version
	serial                 string
}

func (m infoMsg) encode(t testing.TB) []byte {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.DEVLINK_ATTR_BUS_NAME, m.bus)
	ae.String(unix.DEVLINK_ATTR_DEV_NAME, m.dev)
	ae.String(unix.DEVLINK_ATTR_INFO_DRIVER_NAME, m.driver)
	if m.serial != "" {
		ae.String(unix.DEVLINK_ATTR_INFO_SERIAL_NUMBER, m.serial)
	}
	for _, l := range []struct {
		typ uint16
		vs  []Version
	}{{unix.DEVLINK_ATTR_INFO_VERSION_FIXED, m.fixed}, {unix.DEVLINK_ATTR_INFO_VERSION_RUNNING, m.running}, {unix.DEVLINK_ATTR_INFO_VERSION_STORED, m.stored}} {
		for _, v := range l.vs {
			ae.Nested(l.typ, func(n *netlink.AttributeEncoder) error {
				n.String(unix.DEVLINK_ATTR_INFO_VERSION_NAME, v.Name)
				n.String(unix.DEVLINK_ATTR_INFO_VERSION_VALUE, v.Value)
				return nil
			})
		}
	}
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	cx7PF0 = infoMsg{bus: "pci", dev: "0000:08:00.0", driver: "mlx5_core", serial: "e4397f872caeed218000846daa7d2f49",
		fixed:   []Version{{"fw.psid", "MT_0000000894"}},
		running: []Version{{"fw.version", "28.41.1000"}, {"fw", "28.41.1000"}},
		stored:  []Version{{"fw.version", "28.41.1000"}, {"fw", "28.41.1000"}}}
	failedQuery = infoMsg{bus: "pci", dev: "0000:00:06.0", driver: "mlx5_core",
		fixed:   []Version{{"fw.psid", "MT_0000000436"}},
		running: []Version{{"fw.version", "22.41.0188"}, {"fw", "22.41.0188"}},
		stored:  []Version{{"fw.version", "255.255.65535"}, {"fw", "255.255.65535"}}}
	fwError   = reporterMsg{bus: "pci", dev: "0000:07:00.0", name: "fw", state: 1, errs: 7}
	portIndex = uint32(1)
	portTx    = reporterMsg{bus: "pci", dev: "0000:00:0a.0", port: &portIndex, name: "tx", graceP: 500}
	devFw     = reporterMsg{bus: "pci", dev: "0000:00:0a.0", name: "fw"}
)

func TestDecodeReporter(t *testing.T) {
	r, err := DecodeReporter(fwError.encode(t))
	if err != nil {
		t.Fatal(err)
	}
	want := Reporter{Handle: PCI("0000:07:00.0"), Name: "fw", State: some(StateError), Errors: some[uint64](7), Recovers: some[uint64](0)}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got %+v, want %+v", r, want)
	}
	r, err = DecodeReporter(portTx.encode(t))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Port.OK || r.Port.V != 1 || r.Name != "tx" || r.State.V != StateHealthy || !r.Errors.OK || r.Errors.V != 0 {
		t.Errorf("port tx reporter: %+v", r)
	}
	if StateError.String() != "error" || State(7).String() != "state_7" {
		t.Errorf("state names %q %q", StateError, State(7))
	}
}

func TestDecodeReporterRejects(t *testing.T) {
	noHandle := reporterMsg{name: "fw"}
	for name, b := range map[string][]byte{
		"no handle":  noHandle.encode(t),
		"truncated":  fwError.encode(t)[:20],
		"no nest":    mustEncode(t, func(ae *netlink.AttributeEncoder) { ae.String(unix.DEVLINK_ATTR_BUS_NAME, "pci") }),
		"short u64":  reporterWith(t, func(n *netlink.AttributeEncoder) { n.Uint32(unix.DEVLINK_ATTR_HEALTH_REPORTER_ERR_COUNT, 1) }),
		"wide state": reporterWith(t, func(n *netlink.AttributeEncoder) { n.Uint32(unix.DEVLINK_ATTR_HEALTH_REPORTER_STATE, 1) }),
	} {
		if _, err := DecodeReporter(b); !errors.Is(err, ErrBadReply) {
			t.Errorf("%s: err %v, want ErrBadReply", name, err)
		}
	}
}

func mustEncode(t testing.TB, f func(*netlink.AttributeEncoder)) []byte {
	ae := netlink.NewAttributeEncoder()
	f(ae)
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func reporterWith(t testing.TB, f func(*netlink.AttributeEncoder)) []byte {
	return mustEncode(t, func(ae *netlink.AttributeEncoder) {
		ae.String(unix.DEVLINK_ATTR_BUS_NAME, "pci")
		ae.String(unix.DEVLINK_ATTR_DEV_NAME, "0000:07:00.0")
		ae.Nested(unix.DEVLINK_ATTR_HEALTH_REPORTER, func(n *netlink.AttributeEncoder) error {
			n.String(unix.DEVLINK_ATTR_HEALTH_REPORTER_NAME, "fw")
			f(n)
			return nil
		})
	})
}

func TestDecodeInfo(t *testing.T) {
	in, err := DecodeInfo(cx7PF0.encode(t))
	if err != nil {
		t.Fatal(err)
	}
	if in.Handle != PCI("0000:08:00.0") || in.Driver != "mlx5_core" {
		t.Errorf("handle %v driver %q", in.Handle, in.Driver)
	}
	if v, _ := Lookup(in.Fixed, "fw.psid"); v != "MT_0000000894" {
		t.Errorf("fw.psid %q", v)
	}
	cs := Components(in)
	want := []Component{{"fw.version", "28.41.1000", "28.41.1000", some(false)}, {"fw", "28.41.1000", "28.41.1000", some(false)}}
	if !reflect.DeepEqual(cs, want) {
		t.Errorf("components %+v, want %+v", cs, want)
	}
}

// TestComponentsPending: a stored version that differs is pending; the
// failed-query sentinel is not a pending image, and neither is a
// component with no stored version.
func TestComponentsPending(t *testing.T) {
	in, err := DecodeInfo(failedQuery.encode(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Components(in) {
		if c.Pending.OK {
			t.Errorf("%s: pending %v from an unreadable stored version %s", c.Name, c.Pending.V, c.Stored)
		}
	}
	// The same PF after a burn of 28.43.1014 that was not activated:
	// mlx5 then reports the pending image's version as stored.
	burned := cx7PF0
	burned.stored = []Version{{"fw.version", "28.43.1014"}, {"fw", "28.43.1014"}}
	burned.running = append(burned.running, Version{"fw.mgmt.api", "1.5"})
	in, err = DecodeInfo(burned.encode(t))
	if err != nil {
		t.Fatal(err)
	}
	cs := Components(in)
	if len(cs) != 2 || !cs[0].Pending.OK || !cs[0].Pending.V || cs[0].Stored != "28.43.1014" {
		t.Errorf("burned, not activated: %+v", cs)
	}
}

func TestDecodeInfoRejects(t *testing.T) {
	noValue := mustEncode(t, func(ae *netlink.AttributeEncoder) {
		ae.String(unix.DEVLINK_ATTR_BUS_NAME, "pci")
		ae.String(unix.DEVLINK_ATTR_DEV_NAME, "0000:08:00.0")
		ae.Nested(unix.DEVLINK_ATTR_INFO_VERSION_RUNNING, func(n *netlink.AttributeEncoder) error {
			n.String(unix.DEVLINK_ATTR_INFO_VERSION_NAME, "fw.version")
			return nil
		})
	})
	noHandle := infoMsg{driver: "mlx5_core"}
	for name, b := range map[string][]byte{"no value": noValue, "no handle": noHandle.encode(t), "cut": cx7PF0.encode(t)[:30]} {
		if _, err := DecodeInfo(b); !errors.Is(err, ErrBadReply) {
			t.Errorf("%s: err %v, want ErrBadReply", name, err)
		}
	}
}

// fakeConn answers the reporter dump and INFO_GET from messages, and
// records what was asked.
type fakeConn struct {
	reporters [][]byte
	infos     map[Handle][]byte
	err       error
	asked     []Handle
	dumps     int
}

func (f *fakeConn) Execute(_ context.Context, cmd uint8, flags netlink.HeaderFlags, attrs []byte) ([][]byte, error) {
	if f.err != nil {
		return nil, f.err
	}
	switch cmd {
	case unix.DEVLINK_CMD_HEALTH_REPORTER_GET:
		if flags&netlink.Dump == 0 {
			return nil, unix.EINVAL
		}
		f.dumps++
		return f.reporters, nil
	case unix.DEVLINK_CMD_INFO_GET:
		ad, err := netlink.NewAttributeDecoder(attrs)
		if err != nil {
			return nil, err
		}
		var h Handle
		for ad.Next() {
			decodeHandle(ad, &h)
		}
		f.asked = append(f.asked, h)
		if b, ok := f.infos[h]; ok {
			return [][]byte{b}, nil
		}
		return nil, unix.ENODEV
	}
	return nil, unix.EOPNOTSUPP
}

func TestRead(t *testing.T) {
	bad := fwError
	bad.name = "fw crash"
	c := &fakeConn{
		reporters: [][]byte{devFw.encode(t), portTx.encode(t), fwError.encode(t), bad.encode(t), {1, 2, 3}},
		infos:     map[Handle][]byte{PCI("0000:08:00.0"): cx7PF0.encode(t)},
	}
	s := Read(context.Background(), c, Options{Handles: []Handle{PCI("0000:00:0a.0"), PCI("0000:08:00.0")}, Health: true, Info: true})
	if len(s.Reporters) != 2 || s.Reporters[0].Name != "fw" || s.Reporters[1].Name != "tx" {
		t.Errorf("reporters of the kept handles: %+v", s.Reporters)
	}
	if !reflect.DeepEqual(c.asked, []Handle{PCI("0000:00:0a.0"), PCI("0000:08:00.0")}) {
		t.Errorf("INFO_GET asked %v: only the kept handles, each alone", c.asked)
	}
	if len(s.Infos) != 1 || s.Infos[0].Handle != PCI("0000:08:00.0") {
		t.Errorf("infos %+v", s.Infos)
	}
	wantOut := map[Query]map[Status]int{QueryHealth: {StatusOK: 1}, QueryInfo: {StatusNoDevice: 1, StatusOK: 1}}
	if !reflect.DeepEqual(s.Outcomes, wantOut) {
		t.Errorf("outcomes %v, want %v", s.Outcomes, wantOut)
	}
	// The undecodable message is an error; the reporter of a handle not
	// kept is dropped before its name is judged.
	if len(s.Errors) != 1 || !errors.Is(s.Errors[0], ErrBadReply) {
		t.Errorf("errors %v", s.Errors)
	}
	bad.dev = "0000:00:0a.0"
	c.reporters = append(c.reporters, bad.encode(t))
	if s := Read(context.Background(), c, Options{Handles: []Handle{PCI("0000:00:0a.0")}, Health: true}); s.Skipped != 1 || len(s.Reporters) != 2 {
		t.Errorf("a reporter name with a space: skipped %d, reporters %+v", s.Skipped, s.Reporters)
	}
}

func TestReadNoDevlink(t *testing.T) {
	c := &fakeConn{err: ErrNoDevlink}
	s := Read(context.Background(), c, Options{Handles: []Handle{PCI("0000:08:00.0"), PCI("0000:08:00.1")}, Health: true, Info: true})
	want := map[Query]map[Status]int{QueryHealth: {StatusNoDevlink: 1}, QueryInfo: {StatusNoDevlink: 1}}
	if !reflect.DeepEqual(s.Outcomes, want) || len(s.Errors) != 0 {
		t.Errorf("outcomes %v errors %v, want %v and none: a kernel without devlink is asked once per query", s.Outcomes, s.Errors, want)
	}
	if s := Read(context.Background(), c, Options{Health: true}); s.Outcomes != nil {
		t.Errorf("no handles, yet asked: %v", s.Outcomes)
	}
}

func TestReadTruncated(t *testing.T) {
	c := &fakeConn{reporters: [][]byte{devFw.encode(t), portTx.encode(t), devFw.encode(t)}}
	s := Read(context.Background(), c, Options{Handles: []Handle{PCI("0000:00:0a.0")}, Health: true, MaxReporters: 2})
	if len(s.Reporters) != 2 || s.Outcomes[QueryHealth][StatusTruncated] != 1 || len(s.Errors) != 1 {
		t.Errorf("reporters %d outcomes %v errors %v", len(s.Reporters), s.Outcomes, s.Errors)
	}
}

// TestLiveKernel asks this machine's kernel: the family lookup and a
// reporter dump are real answers whatever the host has. A kernel without
// devlink answers no_devlink, one without devlink devices an empty dump.
func TestLiveKernel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msgs, err := Live{}.Execute(ctx, unix.DEVLINK_CMD_HEALTH_REPORTER_GET, netlink.Request|netlink.Dump, nil)
	switch st := Classify(err); st {
	case StatusOK:
		t.Logf("kernel has devlink: %d health reporters", len(msgs))
		for _, m := range msgs {
			r, err := DecodeReporter(m)
			if err != nil {
				t.Errorf("live reporter: %v", err)
				continue
			}
			t.Logf("%s port %v %s: %s errors %v recovers %v", r.Handle, r.Port, r.Name, r.State.V, r.Errors.V, r.Recovers.V)
		}
	case StatusNoDevlink:
		t.Logf("no devlink family on this kernel")
	default:
		t.Fatalf("reporter dump: %s: %v", st, err)
	}
	// A handle no instance has: ENODEV (or no devlink at all).
	s := Read(ctx, Live{}, Options{Handles: []Handle{PCI("ffff:ff:1f.7")}, Info: true})
	if s.Outcomes[QueryInfo][StatusNoDevice]+s.Outcomes[QueryInfo][StatusNoDevlink] != 1 {
		t.Errorf("INFO_GET of an absent function: %v %v", s.Outcomes, s.Errors)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(fwError.encode(f))
	f.Add(portTx.encode(f))
	f.Add(cx7PF0.encode(f))
	f.Add(failedQuery.encode(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := DecodeReporter(b); err == nil && (r.Name == "" || r.Handle.Bus == "") {
			t.Errorf("accepted a reporter without name or handle: %+v", r)
		}
		if in, err := DecodeInfo(b); err == nil {
			for _, c := range Components(in) {
				if c.Pending.OK && c.Pending.V == (c.Running == c.Stored) {
					t.Errorf("pending %v with running %q stored %q", c.Pending.V, c.Running, c.Stored)
				}
			}
		}
	})
}
