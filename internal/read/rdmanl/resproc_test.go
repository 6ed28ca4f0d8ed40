// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package rdmanl

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
)

// The per-object replies are built in the layout res_get_common_dumpit
// writes (drivers/infiniband/core/nldev.c): fill_nldev_handle, then the
// type's table (RES_QP, RES_CQ, ...) of entries, each with its fields and
// fill_res_name_pid's RES_KERN_NAME for a kernel object or RES_PID for a
// user one. The objects and owners are those iproute2 commit 96f59e7f
// ("rdma: Provide parent context index for all objects except CM_ID")
// records from a ConnectX host's mlx5_0 with ibv_rc_pingpong running, and
// commit 42789412 ("rdma: Add context resource tracking information")
// records for ibp8s0f0's contexts; see testdata/README.md.

// obj is one object: a PID, or a kernel module name, or neither.
type obj struct {
	id   uint32
	pid  uint32
	kern string
}

func objectsMsg(index uint32, name string, table, entry, idAttr uint16, objs ...obj) []byte {
	t := newAttr(int(table), nil)
	for _, o := range objs {
		e := t.add(int(entry), nil)
		e.add(int(idAttr), u32Data(o.id))
		switch {
		case o.kern != "":
			e.add(attrResKernName, stringData(o.kern))
		case o.pid != 0:
			e.add(attrResPID, u32Data(o.pid))
		}
	}
	return append(handleAttrs(index, name, 0), t.encode()...)
}

func dumpKey(cmd int, index uint32) string {
	return fmt.Sprintf("%d %d=%d", cmd, attrDevIndex, index)
}

// pingpongHost is mlx5_0 of commit 96f59e7f: the QP dump split across
// two messages as the kernel splits a full skb.
func pingpongHost() *fakeConn {
	const pp = 548
	return &fakeConn{replies: map[string][][]byte{
		"1": {deviceMsg(0, "mlx5_0", 1)},
		dumpKey(cmdResQPGet, 0): {
			objectsMsg(0, "mlx5_0", attrResQP, attrResQPEntry, attrResLQPN,
				obj{id: 0, kern: "ib_core"}, obj{id: 1, kern: "ib_core"}, obj{id: 7, kern: "ib_core"}),
			objectsMsg(0, "mlx5_0", attrResQP, attrResQPEntry, attrResLQPN,
				obj{id: 8, kern: "ib_ipoib"}, obj{id: 9, pid: pp}),
		},
		dumpKey(cmdResCQGet, 0): {objectsMsg(0, "mlx5_0", attrResCQ, attrResCQEntry, attrResCQN,
			obj{id: 2, kern: "ib_core"}, obj{id: 3, kern: "mlx5_ib"}, obj{id: 4, kern: "ib_ipoib"},
			obj{id: 5, kern: "ib_ipoib"}, obj{id: 6, kern: "mlx5_ib"}, obj{id: 7, pid: pp})},
		dumpKey(cmdResMRGet, 0): {objectsMsg(0, "mlx5_0", attrResMR, attrResMREntry, attrResMRN,
			obj{id: 4, pid: pp})},
		dumpKey(cmdResPDGet, 0): {objectsMsg(0, "mlx5_0", attrResPD, attrResPDEntry, attrResPDN,
			obj{id: 1, kern: "ib_core"}, obj{id: 2, kern: "ib_ipoib"}, obj{id: 3, kern: "mlx5_ib"}, obj{id: 4, pid: pp})},
		dumpKey(cmdResCtxGet, 0): {objectsMsg(0, "mlx5_0", attrResCtx, attrResCtxEntry, attrResCtxN,
			obj{id: 0, pid: pp})},
	}}
}

func names(m map[uint32]string) func(uint32) (string, bool) {
	return func(pid uint32) (string, bool) {
		n, ok := m[pid]
		return n, ok
	}
}

func byType(rs []ProcessResources) map[string]ProcessResources {
	out := map[string]ProcessResources{}
	for _, r := range rs {
		out[r.Device+" "+r.Type] = r
	}
	return out
}

func TestProcessResources(t *testing.T) {
	c := pingpongHost()
	s := Read(context.Background(), c, Options{ProcessResources: true, ProcessName: names(map[uint32]string{548: "ibv_rc_pingpong"})})
	if len(s.Errors) != 0 {
		t.Fatalf("errors %v", s.Errors)
	}
	if got := s.Outcomes[QueryResourceObjects]; !reflect.DeepEqual(got, map[Status]int{StatusOK: 5}) {
		t.Errorf("outcomes %v", got)
	}
	got := byType(s.ProcessResources)
	want := map[string]map[string]uint64{
		"mlx5_0 qp":  {"[ib_core]": 3, "[ib_ipoib]": 1, "ibv_rc_pingpong": 1},
		"mlx5_0 cq":  {"[ib_core]": 1, "[mlx5_ib]": 2, "[ib_ipoib]": 2, "ibv_rc_pingpong": 1},
		"mlx5_0 mr":  {"ibv_rc_pingpong": 1},
		"mlx5_0 pd":  {"[ib_core]": 1, "[ib_ipoib]": 1, "[mlx5_ib]": 1, "ibv_rc_pingpong": 1},
		"mlx5_0 ctx": {"ibv_rc_pingpong": 1},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, w := range want {
		r := got[k]
		if !reflect.DeepEqual(r.Objects, w) || r.Unnamed != 0 || r.Capped || r.Truncated {
			t.Errorf("%s: %+v, want objects %v", k, r, w)
		}
	}
}

// TestProcessResourcesCap: two processes on a device, a cap of one: the
// one with more objects keeps its name. client.1 and PID 31609 are those
// of iproute2 commit 5937552b's `rdma stat qp show`.
func TestProcessResourcesCap(t *testing.T) {
	c := pingpongHost()
	k := dumpKey(cmdResQPGet, 0)
	c.replies[k] = append(c.replies[k], objectsMsg(0, "mlx5_0", attrResQP, attrResQPEntry, attrResLQPN, obj{id: 178, pid: 31609}))
	s := Read(context.Background(), c, Options{ProcessResources: true, MaxProcesses: 1,
		ProcessName: names(map[uint32]string{548: "ibv_rc_pingpong", 31609: "client.1"})})
	got := byType(s.ProcessResources)
	qp := got["mlx5_0 qp"]
	if !reflect.DeepEqual(qp.Objects, map[string]uint64{"[ib_core]": 3, "[ib_ipoib]": 1, "ibv_rc_pingpong": 1, OtherProcesses: 1}) || !qp.Capped {
		t.Errorf("qp %+v", qp)
	}
	if !got["mlx5_0 mr"].Capped {
		t.Errorf("mr not marked capped: the cap is the device's")
	}
	// Kernel owners are not counted against the cap.
	if got["mlx5_0 cq"].Objects["[mlx5_ib]"] != 2 {
		t.Errorf("cq %+v", got["mlx5_0 cq"])
	}
}

// TestProcessResourcesTruncated: a cap of 4 objects stops the QP dump in
// its second message, cancels it (no third message is taken) and skips
// every later dump without asking.
func TestProcessResourcesTruncated(t *testing.T) {
	c := pingpongHost()
	k := dumpKey(cmdResQPGet, 0)
	c.replies[k] = append(c.replies[k], objectsMsg(0, "mlx5_0", attrResQP, attrResQPEntry, attrResLQPN, obj{id: 178, pid: 31609}))
	s := Read(context.Background(), c, Options{ProcessResources: true, MaxObjects: 4,
		ProcessName: names(map[uint32]string{548: "ibv_rc_pingpong"})})
	if len(s.Errors) != 0 {
		t.Errorf("the object cap is a setting, not an error: %v", s.Errors)
	}
	if got := s.Outcomes[QueryResourceObjects]; !reflect.DeepEqual(got, map[Status]int{StatusTruncated: 5}) {
		t.Errorf("outcomes %v", got)
	}
	if n := c.delivered[k]; n != 2 {
		t.Errorf("%d QP dump messages taken, want 2 (the dump is abandoned at the cap)", n)
	}
	for _, r := range c.requests {
		if r == dumpKey(cmdResCQGet, 0) || r == dumpKey(cmdResCtxGet, 0) {
			t.Errorf("asked %s after the cap", r)
		}
	}
	got := byType(s.ProcessResources)
	if qp := got["mlx5_0 qp"]; !qp.Truncated || !reflect.DeepEqual(qp.Objects, map[string]uint64{"[ib_core]": 3, "[ib_ipoib]": 1}) {
		t.Errorf("qp %+v", qp)
	}
	if cq := got["mlx5_0 cq"]; !cq.Truncated || len(cq.Objects) != 0 {
		t.Errorf("cq %+v", cq)
	}
}

// TestProcessResourcesUnnamed: an entry without PID or kernel name (the
// task is gone: fill_res_name_pid sends nothing) and a PID whose comm
// cannot be read are counted unnamed, never under a made-up name.
func TestProcessResourcesUnnamed(t *testing.T) {
	c := pingpongHost()
	c.replies[dumpKey(cmdResMRGet, 0)] = [][]byte{objectsMsg(0, "mlx5_0", attrResMR, attrResMREntry, attrResMRN,
		obj{id: 4, pid: 548}, obj{id: 5})}
	s := Read(context.Background(), c, Options{ProcessResources: true, ProcessName: names(nil)})
	got := byType(s.ProcessResources)
	if mr := got["mlx5_0 mr"]; mr.Unnamed != 2 || len(mr.Objects) != 0 {
		t.Errorf("mr %+v", mr)
	}
	if qp := got["mlx5_0 qp"]; qp.Unnamed != 1 || qp.Objects["[ib_core]"] != 3 {
		t.Errorf("qp %+v", qp)
	}
}

// TestProcessResourcesRefused: a kernel before RES_CTX_GET (5.14) answers
// EOPNOTSUPP or EINVAL, a policy EPERM: each is counted, its type has no
// entry, and none is an error.
func TestProcessResourcesRefused(t *testing.T) {
	c := pingpongHost()
	c.errs = map[string]error{dumpKey(cmdResCtxGet, 0): unix.EOPNOTSUPP, dumpKey(cmdResMRGet, 0): unix.EPERM}
	s := Read(context.Background(), c, Options{ProcessResources: true})
	if len(s.Errors) != 0 {
		t.Errorf("errors %v", s.Errors)
	}
	want := map[Status]int{StatusOK: 3, StatusUnsupported: 1, StatusDenied: 1}
	if got := s.Outcomes[QueryResourceObjects]; !reflect.DeepEqual(got, want) {
		t.Errorf("outcomes %v, want %v", got, want)
	}
	got := byType(s.ProcessResources)
	if _, ok := got["mlx5_0 ctx"]; ok {
		t.Errorf("ctx entry after EOPNOTSUPP: %+v", got["mlx5_0 ctx"])
	}
	if _, ok := got["mlx5_0 mr"]; ok {
		t.Errorf("mr entry after EPERM")
	}
	if got["mlx5_0 qp"].Unnamed != 1 {
		t.Errorf("without a namer every user object is unnamed: %+v", got["mlx5_0 qp"])
	}
}

func TestCleanComm(t *testing.T) {
	for in, want := range map[string]string{
		"ibv_rc_pingpong\n":       "ibv_rc_pingpong",
		"client.1\n":              "client.1",
		"a\x01b\n":                "a?b",
		"\n":                      "",
		"sixteen-chars-xyz\nmore": "sixteen-chars-x",
	} {
		if got := CleanComm([]byte(in)); got != want {
			t.Errorf("CleanComm(%q) = %q, want %q", in, got, want)
		}
	}
}

// The object ids of the entries (RDMA_NLDEV_ATTR_RES_PDN, _CQN, _MRN,
// _CTXN): the kernel sends them, the reader needs none.
const (
	attrResPDN  = 60
	attrResCQN  = 61
	attrResMRN  = 62
	attrResCtxN = 64
)
