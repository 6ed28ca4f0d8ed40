// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package rdmanl

import (
	"context"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
)

func roceHost() *fakeConn {
	get, res := "1", "9"
	return &fakeConn{
		replies: map[string][][]byte{
			get: {deviceMsg(0, "mlx5_0", 1), deviceMsg(1, "mlx5_1", 1), deviceMsg(2, "rxe0", 1)},
			portKey(cmdStatGet, 0, 1): {statMsg(0, "mlx5_0", 1,
				Counter{"out_of_buffer", 12}, Counter{"np_cnp_sent", 4711}, Counter{"cc_rx_ce_pkts", 90210})},
			portKey(cmdStatGetStatus, 0, 1): {statusMsg(0, "mlx5_0", 1,
				CounterStatus{Name: "out_of_buffer"}, CounterStatus{Name: "np_cnp_sent"},
				CounterStatus{Name: "cc_rx_ce_pkts", Optional: true, Enabled: true},
				CounterStatus{Name: "cc_rx_cnp_pkts", Optional: true},
				CounterStatus{Name: "cc_tx_cnp_pkts", Optional: true})},
			portKey(cmdStatGet, 1, 1): {statMsg(1, "mlx5_1", 1, Counter{"out_of_buffer", 0})},
			res: {
				resourceMsg(0, "mlx5_0", [][2]any{{"pd", 4}, {"cq", 11}, {"qp", 9}, {"cm_id", 2}, {"mr", 30}, {"ctx", 3}, {"srq", 1}}),
				resourceMsg(1, "mlx5_1", [][2]any{{"pd", 1}, {"cq", 1}, {"qp", 1}, {"cm_id", 0}, {"mr", 0}, {"ctx", 0}, {"srq", 0}}),
				resourceMsg(2, "rxe0", [][2]any{{"pd", 1}}),
			},
		},
		errs: map[string]error{
			// A kernel before 5.18 has no STAT_GET_STATUS (EINVAL from
			// rdma_nl_rcv_msg); rxe0 is excluded and must not be asked.
			portKey(cmdStatGetStatus, 1, 1): unix.EOPNOTSUPP,
			portKey(cmdStatGet, 2, 1):       unix.EINVAL,
			portKey(cmdStatGetStatus, 2, 1): unix.EINVAL,
		},
	}
}

func TestRead(t *testing.T) {
	c := roceHost()
	s := Read(context.Background(), c, Options{Stats: true, Status: true, Resources: true,
		Keep: func(d string) bool { return d != "rxe0" }})
	if len(s.Errors) != 0 {
		t.Fatalf("errors %v", s.Errors)
	}
	for _, r := range c.requests {
		if r == portKey(cmdStatGet, 2, 1) || r == portKey(cmdStatGetStatus, 2, 1) {
			t.Errorf("excluded device asked: %s", r)
		}
	}
	want := map[Query]map[Status]int{
		QueryDevice:        {StatusOK: 1},
		QueryStatistic:     {StatusOK: 2},
		QueryCounterStatus: {StatusOK: 1, StatusUnsupported: 1},
		QueryResource:      {StatusOK: 1},
	}
	if !reflect.DeepEqual(s.Outcomes, want) {
		t.Errorf("outcomes %v, want %v", s.Outcomes, want)
	}
	if len(s.Devices) != 2 || s.Devices[1] != (Device{Index: 1, Name: "mlx5_1", Ports: 1}) {
		t.Errorf("devices %+v", s.Devices)
	}
	wantStats := PortStats{Device: "mlx5_0", Port: 1, Counters: []Counter{{"cc_rx_ce_pkts", 90210}, {"np_cnp_sent", 4711}, {"out_of_buffer", 12}}}
	if len(s.Stats) != 2 || !reflect.DeepEqual(s.Stats[0], wantStats) {
		t.Errorf("stats %+v", s.Stats)
	}
	if len(s.Status) != 1 || len(s.Status[0].Counters) != 5 {
		t.Fatalf("status %+v", s.Status)
	}
	if c := s.Status[0].Counters[0]; c != (CounterStatus{Name: "cc_rx_ce_pkts", Optional: true, Enabled: true, Index: 2, HasIndex: true}) {
		t.Errorf("first status %+v", c)
	}
	if c := s.Status[0].Counters[3]; c != (CounterStatus{Name: "np_cnp_sent", Index: 1, HasIndex: true}) {
		t.Errorf("np_cnp_sent status %+v", c)
	}
	if len(s.Resources) != 2 || s.Resources[0].Totals["mr"] != 30 || s.Resources[1].Device != "mlx5_1" {
		t.Errorf("resources %+v", s.Resources)
	}
}

func TestReadNoSocketFamily(t *testing.T) {
	c := &fakeConn{errs: map[string]error{"1": unix.EPROTONOSUPPORT}}
	s := Read(context.Background(), c, Options{Stats: true, Resources: true})
	if !reflect.DeepEqual(s.Outcomes, map[Query]map[Status]int{QueryDevice: {StatusNoNetlink: 1}}) || len(s.Errors) != 0 {
		t.Errorf("outcomes %v errors %v", s.Outcomes, s.Errors)
	}
	if len(c.requests) != 1 {
		t.Errorf("requests after no socket family: %v", c.requests)
	}
}

func TestReadCap(t *testing.T) {
	c := roceHost()
	s := Read(context.Background(), c, Options{Resources: true, MaxDevices: 2})
	if s.Outcomes[QueryDevice][StatusTruncated] != 1 || s.Outcomes[QueryResource][StatusTruncated] != 1 {
		t.Errorf("outcomes %v", s.Outcomes)
	}
	if len(s.Devices) != 2 || len(s.Resources) != 2 || len(s.Errors) != 2 {
		t.Errorf("devices %v resources %v errors %v", s.Devices, s.Resources, s.Errors)
	}
}

func TestDecodeMalformed(t *testing.T) {
	good := statMsg(0, "mlx5_0", 1, Counter{"out_of_buffer", 12})
	for name, msg := range map[string][]byte{
		"truncated":   good[:len(good)-5],
		"short value": append(handleAttrs(0, "mlx5_0", 1), newAttr(attrStatHWCounters, newAttr(attrStatHWCounterEntry, append(newAttr(attrStatHWCounterEntryName, stringData("x")).encode(), newAttr(attrStatHWCounterEntryValue, []byte{1, 2}).encode()...)).encode()).encode()...),
		"no port":     handleAttrs(0, "mlx5_0", 0),
		"zero length": {0, 0, 1, 0},
		"length past": {200, 0, 1, 0, 0, 0, 0, 0},
	} {
		if _, err := DecodeStat(msg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := DecodeStat(good); err != nil {
		t.Errorf("good: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(statMsg(0, "mlx5_0", 1, Counter{"out_of_buffer", 12}, Counter{"cc_rx_ce_pkts", 3}))
	f.Add(statusMsg(0, "mlx5_0", 1, CounterStatus{Name: "cc_rx_ce_pkts", Optional: true, Enabled: true}))
	f.Add(resourceMsg(0, "mlx5_0", [][2]any{{"qp", 9}}))
	f.Add(deviceMsg(3, "mlx5_3", 2))
	f.Add(ieeeMsg(0x08, []App{{Selector: 5, Priority: 3, Protocol: 26}}))
	f.Add(objectsMsg(0, "mlx5_0", attrResQP, attrResQPEntry, attrResLQPN, obj{id: 8, kern: "ib_ipoib"}, obj{id: 9, pid: 548}))
	f.Add(modeMsg(2, "mlx5_2", 1, counterModeAuto, counterMaskQPType))
	f.Add(countersMsg(2, "mlx5_2", qpc{id: 5, port: 1, qpType: 2, lqpns: []uint32{178}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		// No input may panic; a decoded value must be whole.
		if s, err := DecodeStat(b); err == nil && (s.Device == "" || s.Port == 0) {
			t.Errorf("statistic without handle: %+v", s)
		}
		if s, err := DecodeStatus(b); err == nil && (s.Device == "" || s.Port == 0) {
			t.Errorf("status without handle: %+v", s)
		}
		if r, err := DecodeResources(b); err == nil && r.Device == "" {
			t.Errorf("resources without device: %+v", r)
		}
		if d, err := DecodeDevice(b); err == nil && d.Name == "" {
			t.Errorf("device without name: %+v", d)
		}
		if d, err := DecodeDCB(b); err == nil && d.Netdev == "" {
			t.Errorf("dcb %+v", d)
		}
		if dev, err := decodeObjects(b, attrResQP, attrResQPEntry, func(owner) bool { return true }); err == nil && dev == "" {
			t.Errorf("objects without device")
		}
		if m, err := DecodeQPCounterMode(b); err == nil && (m.Device == "" || m.Port == 0) {
			t.Errorf("qp counter mode without handle: %+v", m)
		}
		_ = decodeQPCounters(b, func(qpCounter) bool { return true })
	})
}
