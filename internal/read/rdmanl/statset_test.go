// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package rdmanl

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestEncodeStatSet checks the request body byte by byte against the
// layout written out by hand from linux/netlink.h (struct nlattr: u16
// length including the 4-byte header, u16 type; payloads padded to 4) and
// the attribute numbers of include/uapi/rdma/rdma_netlink.h. The encoder
// under test is appendAttr (attr.go); no public source records
// the bytes iproute2 sends, so this is the layout, not a capture.
func TestEncodeStatSet(t *testing.T) {
	u16 := func(v uint16) []byte { b := make([]byte, 2); binary.NativeEndian.PutUint16(b, v); return b }
	u32 := func(v uint32) []byte { b := make([]byte, 4); binary.NativeEndian.PutUint32(b, v); return b }
	var want []byte
	add := func(parts ...[]byte) {
		for _, p := range parts {
			want = append(want, p...)
		}
	}
	add(u16(8), u16(1), u32(3))     // RDMA_NLDEV_ATTR_DEV_INDEX = 1
	add(u16(8), u16(3), u32(1))     // RDMA_NLDEV_ATTR_PORT_INDEX = 3
	add(u16(4+2*8), u16(80|1<<15))  // RDMA_NLDEV_ATTR_STAT_HWCOUNTERS = 80, NLA_F_NESTED
	add(u16(8), u16(94), u32(0x2a)) // RDMA_NLDEV_ATTR_STAT_HWCOUNTER_INDEX = 94
	add(u16(8), u16(94), u32(0x2c))
	// Unsorted and repeated in, sorted and once out.
	got := EncodeStatSet(3, 1, []uint32{0x2c, 0x2a, 0x2c})
	if !bytes.Equal(got, want) {
		t.Fatalf("body\n got % x\nwant % x", got, want)
	}
	dev, port, idx, err := DecodeStatSet(got)
	if err != nil || dev != 3 || port != 1 || !slices.Equal(idx, []uint32{0x2a, 0x2c}) {
		t.Errorf("decoded %d %d %v %v", dev, port, idx, err)
	}

	// The empty set (`rdma statistic unset`): an empty nest, still present.
	empty := EncodeStatSet(3, 1, nil)
	if tail := empty[len(empty)-4:]; !bytes.Equal(tail, append(u16(4), u16(80|1<<15)...)) {
		t.Errorf("empty set ends % x, want an empty STAT_HWCOUNTERS nest", tail)
	}
	if _, _, idx, err := DecodeStatSet(empty); err != nil || len(idx) != 0 {
		t.Errorf("empty set decoded %v %v", idx, err)
	}
	if _, _, _, err := DecodeStatSet(empty[:16]); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a body without the table: %v, want EINVAL as the kernel answers", err)
	}
}

// kernelCounters is a fake of the kernel's side of the optional
// counters: a device dump, STAT_GET_STATUS, and STAT_SET applied as
// nldev_stat_set_counter_dynamic_doit does (EINVAL for an index past the
// table or of a counter that is not optional, else every optional counter
// enabled exactly when listed).
type kernelCounters struct {
	name     string
	index    uint32
	counters []CounterStatus // indexed by position
	sets     [][]byte
	setErr   error
	// ignoreSet drops a set without error (a kernel that did not apply it).
	ignoreSet bool
}

func (k *kernelCounters) Exec(_ context.Context, proto int, typ uint16, flags int, body []byte, keep func([]byte) bool) error {
	if proto != unix.NETLINK_RDMA {
		return unix.EPROTONOSUPPORT
	}
	switch typ {
	case nldevType(cmdGet):
		keep(deviceMsg(k.index, k.name, 1))
		return nil
	case nldevType(cmdStatGetStatus):
		if key(typ, body) != portKey(cmdStatGetStatus, k.index, 1) {
			return unix.EINVAL
		}
		keep(statusMsg(k.index, k.name, 1, k.counters...))
		return nil
	case nldevType(cmdStatSet):
		if flags&unix.NLM_F_ACK == 0 {
			return errors.New("STAT_SET sent without NLM_F_ACK")
		}
		k.sets = append(k.sets, body)
		if k.setErr != nil {
			return k.setErr
		}
		dev, port, idx, err := DecodeStatSet(body)
		if err != nil {
			return err
		}
		if dev != k.index || port != 1 {
			return unix.EINVAL
		}
		target := map[uint32]bool{}
		for _, i := range idx {
			if int(i) >= len(k.counters) || !k.counters[i].Optional {
				return unix.EINVAL
			}
			target[i] = true
		}
		if k.ignoreSet {
			return nil
		}
		for i := range k.counters {
			if k.counters[i].Optional {
				k.counters[i].Enabled = target[uint32(i)]
			}
		}
		keep(handleAttrs(k.index, k.name, 1))
		return nil
	}
	return unix.EOPNOTSUPP
}

// cx6dx is mlx5_0 with the mlx5 driver's three congestion counters
// optional (drivers/infiniband/hw/mlx5/counters.c), cc_rx_ce_pkts on.
func cx6dx() *kernelCounters {
	return &kernelCounters{name: "mlx5_0", index: 4, counters: []CounterStatus{
		{Name: "out_of_buffer"}, {Name: "np_cnp_sent"},
		{Name: "cc_rx_ce_pkts", Optional: true, Enabled: true},
		{Name: "cc_rx_cnp_pkts", Optional: true},
		{Name: "cc_tx_cnp_pkts", Optional: true},
	}}
}

func TestSetOptionalCounters(t *testing.T) {
	ctx := context.Background()
	k := cx6dx()
	st, err := ReadCounterStatus(ctx, k, "mlx5_0", 1)
	if err != nil {
		t.Fatal(err)
	}
	offered, enabled := st.Optional()
	if !slices.Equal(offered, []string{"cc_rx_ce_pkts", "cc_rx_cnp_pkts", "cc_tx_cnp_pkts"}) || !slices.Equal(enabled, []string{"cc_rx_ce_pkts"}) {
		t.Fatalf("offered %v enabled %v", offered, enabled)
	}

	// The whole set: cc_rx_ce_pkts, enabled now and not named, goes off.
	if err := SetOptionalCounters(ctx, k, "mlx5_0", 1, []string{"cc_tx_cnp_pkts", "cc_rx_cnp_pkts"}); err != nil {
		t.Fatal(err)
	}
	if want := EncodeStatSet(4, 1, []uint32{3, 4}); len(k.sets) != 1 || !bytes.Equal(k.sets[0], want) {
		t.Errorf("sent %x, want %x", k.sets, want)
	}
	st, _ = ReadCounterStatus(ctx, k, "mlx5_0", 1)
	if _, enabled := st.Optional(); !slices.Equal(enabled, []string{"cc_rx_cnp_pkts", "cc_tx_cnp_pkts"}) {
		t.Errorf("enabled after the set: %v", enabled)
	}
	// None: an empty table turns them all off.
	if err := SetOptionalCounters(ctx, k, "mlx5_0", 1, nil); err != nil {
		t.Fatal(err)
	}
	st, _ = ReadCounterStatus(ctx, k, "mlx5_0", 1)
	if _, enabled := st.Optional(); len(enabled) != 0 {
		t.Errorf("enabled after the empty set: %v", enabled)
	}

	// A counter the port does not offer as optional: nothing is sent.
	k.sets = nil
	for _, n := range []string{"np_cnp_sent", "rdma_tx_bytes"} {
		err := SetOptionalCounters(ctx, k, "mlx5_0", 1, []string{n})
		if !errors.Is(err, ErrNotOptional) || len(k.sets) != 0 {
			t.Errorf("%s: %v, %d sets", n, err, len(k.sets))
		}
	}
	// A device or port that is not there.
	if err := SetOptionalCounters(ctx, k, "mlx5_9", 1, nil); !errors.Is(err, ErrNoDevice) || !errors.Is(err, unix.ENODEV) {
		t.Errorf("unknown device: %v", err)
	}
	if _, err := ReadCounterStatus(ctx, k, "mlx5_0", 2); !errors.Is(err, ErrNoDevice) {
		t.Errorf("unknown port: %v", err)
	}
	// The kernel refuses (no CAP_NET_ADMIN): the errno comes through.
	k.setErr = unix.EPERM
	if err := SetOptionalCounters(ctx, k, "mlx5_0", 1, []string{"cc_rx_ce_pkts"}); !errors.Is(err, unix.EPERM) {
		t.Errorf("refused set: %v", err)
	}
	// A kernel that acks and does not apply it: the read back says so.
	k.setErr, k.ignoreSet = nil, true
	if err := SetOptionalCounters(ctx, k, "mlx5_0", 1, []string{"cc_rx_ce_pkts"}); err == nil {
		t.Error("a set the kernel did not apply passed")
	}
}
