// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package netdev

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
)

// recordedReplies are the ETHTOOL_MSG_LINKSTATE_GET replies of
// fixtures/recorded/ethtool-netlink-linkstate-fec-strace-linux-6.18.txt
// (strace -x of ethtool 6.1 on Linux 6.18), by interface: the generic
// netlink payload after the netlink header, genl header included.
func recordedReplies(t testing.TB) map[string][]byte {
	t.Helper()
	b := hostfstest.Tool(t, "../recorded/ethtool-netlink-linkstate-fec-strace-linux-6.18.txt")
	ifRe := regexp.MustCompile(`^## ethtool (\S+): ETHTOOL_MSG_LINKSTATE_GET`)
	payload := regexp.MustCompile(`^recvmsg\(.*nlmsg_type=ethtool, .*?\}, "((?:\\x[0-9a-f]{2})+)"`)
	out := map[string][]byte{}
	cur := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if m := ifRe.FindStringSubmatch(sc.Text()); m != nil {
			cur = m[1]
			continue
		}
		if m := payload.FindStringSubmatch(sc.Text()); m != nil && cur != "" {
			var raw []byte
			for _, h := range strings.Split(m[1], `\x`)[1:] {
				v, err := strconv.ParseUint(h, 16, 8)
				if err != nil {
					t.Fatal(err)
				}
				raw = append(raw, byte(v))
			}
			out[cur] = raw
			cur = ""
		}
	}
	if len(out) != 4 {
		t.Fatalf("%d recorded replies, want 4", len(out))
	}
	return out
}

// The real replies of a 6.18 kernel: an up virtio_net (eth0), a down
// bridge (cni-podman0), an ifb without get_link (no LINK attribute: the
// state is unknown, not down) and lo; none has an extended state.
func TestDecodeLinkStateRecorded(t *testing.T) {
	want := map[string]Opt[bool]{"eth0": some(true), "cni-podman0": some(false), "ifb0": {}, "lo": some(true)}
	for name, raw := range recordedReplies(t) {
		if raw[0] != unix.ETHTOOL_MSG_LINKSTATE_GET || raw[1] != ethtoolGenlVersion {
			t.Fatalf("%s: genl header % x", name, raw[:4])
		}
		ls, err := DecodeLinkState(raw[4:])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if ls.Link != want[name] || ls.ExtState.OK || ls.ExtSubstate.OK || ls.DownEvents.OK {
			t.Errorf("%s: %+v, want link %+v and nothing else", name, ls, want[name])
		}
	}
}

// encode builds reply attributes as net/ethtool/linkstate.c fills them
// (header nest, then u8 LINK, EXT_STATE, EXT_SUBSTATE, u32 EXT_DOWN_CNT).
// Encoded here, not recorded: no public recording of a reply with an
// extended state was found, and this machine's NICs have none.
func encode(t *testing.T, f func(ae *netlink.AttributeEncoder)) []byte {
	t.Helper()
	ae := netlink.NewAttributeEncoder()
	ae.Nested(unix.ETHTOOL_A_LINKSTATE_HEADER, func(nae *netlink.AttributeEncoder) error {
		nae.Uint32(unix.ETHTOOL_A_HEADER_DEV_INDEX, 7)
		nae.String(unix.ETHTOOL_A_HEADER_DEV_NAME, "enp59s0f0np0")
		return nil
	})
	f(ae)
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeLinkStateExt(t *testing.T) {
	b := encode(t, func(ae *netlink.AttributeEncoder) {
		ae.Uint8(unix.ETHTOOL_A_LINKSTATE_LINK, 0)
		ae.Uint8(unix.ETHTOOL_A_LINKSTATE_EXT_STATE, unix.ETHTOOL_LINK_EXT_STATE_CABLE_ISSUE)
		ae.Uint8(unix.ETHTOOL_A_LINKSTATE_EXT_SUBSTATE, unix.ETHTOOL_LINK_EXT_SUBSTATE_CI_UNSUPPORTED_CABLE)
		ae.Uint32(unix.ETHTOOL_A_LINKSTATE_EXT_DOWN_CNT, 12)
	})
	ls, err := DecodeLinkState(b)
	if err != nil {
		t.Fatal(err)
	}
	if !ls.Link.OK || ls.Link.V || ls.ExtState != some(ExtStateCableIssue) || ls.ExtSubstate != some(uint8(1)) || ls.DownEvents != some(uint32(12)) {
		t.Errorf("%+v", ls)
	}
	if s := ls.ExtState.V.String(); s != "cable_issue" {
		t.Errorf("state name %q", s)
	}
	if s := SubstateName(ls.ExtState.V, ls.ExtSubstate.V); s != "unsupported_cable" {
		t.Errorf("substate name %q", s)
	}
}

func TestExtStateNames(t *testing.T) {
	for st, want := range map[ExtState]string{ExtStateNoCable: "no_cable", ExtStateOverheat: "overheat",
		ExtStateBadSignalIntegrity: "bad_signal_integrity", ExtStateModule: "module", 42: "state_42"} {
		if got := st.String(); got != want {
			t.Errorf("%d: %q, want %q", st, got, want)
		}
	}
	for _, tc := range []struct {
		st   ExtState
		sub  uint8
		want string
	}{
		{ExtStateNoCable, 0, ""}, {ExtStateAutoneg, 1, "no_partner_detected"},
		{ExtStateBadSignalIntegrity, 4, "serdes_alos"}, {ExtStateNoCable, 3, "substate_3"},
		{ExtStateAutoneg, 200, "substate_200"},
	} {
		if got := SubstateName(tc.st, tc.sub); got != tc.want {
			t.Errorf("%v/%d: %q, want %q", tc.st, tc.sub, got, tc.want)
		}
	}
}

func TestDecodeLinkStateMalformed(t *testing.T) {
	raw := recordedReplies(t)["eth0"][4:]
	for name, b := range map[string][]byte{
		"truncated":         raw[:len(raw)-6],
		"attribute overrun": append([]byte{0xff, 0x00, 0x02, 0x00}, raw...),
		"two-byte link": encode(t, func(ae *netlink.AttributeEncoder) {
			ae.Uint16(unix.ETHTOOL_A_LINKSTATE_LINK, 1)
		}),
		"substate alone": encode(t, func(ae *netlink.AttributeEncoder) {
			ae.Uint8(unix.ETHTOOL_A_LINKSTATE_EXT_SUBSTATE, 1)
		}),
	} {
		if ls, err := DecodeLinkState(b); !errors.Is(err, ErrBadReply) {
			t.Errorf("%s: %+v, %v; want ErrBadReply", name, ls, err)
		}
	}
}

// fecReply builds FEC_GET reply attributes as net/ethtool/fec.c fills the
// statistics nest: each counter an array of u64, total first then lanes,
// empty when the driver does not provide it. Encoded here, not recorded.
func fecReply(t *testing.T, corrected, uncorr []uint64) []byte {
	t.Helper()
	arr := func(v []uint64) []byte {
		b := make([]byte, 8*len(v))
		for i, x := range v {
			binary.NativeEndian.PutUint64(b[8*i:], x)
		}
		return b
	}
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(4, 1<<3) // ETHTOOL_A_FEC_ACTIVE
	ae.Nested(fecAttrStats, func(nae *netlink.AttributeEncoder) error {
		nae.Bytes(fecStatCorrected, arr(corrected))
		nae.Bytes(fecStatUncorrectable, arr(uncorr))
		return nil
	})
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeFEC(t *testing.T) {
	st, err := DecodeFEC(fecReply(t, []uint64{1201, 300, 301, 300, 300}, []uint64{3}))
	if err != nil {
		t.Fatal(err)
	}
	if st.CorrectedBlocks != some(uint64(1201)) || st.UncorrectableBlocks != some(uint64(3)) {
		t.Errorf("%+v", st)
	}
	st, err = DecodeFEC(fecReply(t, []uint64{5}, nil))
	if err != nil || st.CorrectedBlocks != some(uint64(5)) || st.UncorrectableBlocks.OK {
		t.Errorf("uncorrectable not provided: %+v, %v", st, err)
	}
	ae := netlink.NewAttributeEncoder()
	ae.Nested(fecAttrStats, func(nae *netlink.AttributeEncoder) error {
		nae.Bytes(fecStatCorrected, []byte{1, 2, 3})
		return nil
	})
	bad, _ := ae.Encode()
	if _, err := DecodeFEC(bad); !errors.Is(err, ErrBadReply) {
		t.Errorf("3-byte counter: %v, want ErrBadReply", err)
	}
}

func FuzzDecodeLinkState(f *testing.F) {
	for _, raw := range recordedReplies(f) {
		f.Add(raw[4:])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ls, err := DecodeLinkState(b)
		if err == nil && ls.ExtSubstate.OK && !ls.ExtState.OK {
			t.Errorf("substate without state accepted")
		}
		_ = ls.ExtState.V.String()
		_ = SubstateName(ls.ExtState.V, ls.ExtSubstate.V)
		_, _ = DecodeFEC(b)
	})
}
