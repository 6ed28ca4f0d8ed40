// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/rdma-doctor/rdma_doctor/internal/read/rdmanl"
)

// series writes each metric f sends as `name{label=value,...} value`.
func series(t *testing.T, f func(out *sink)) []string {
	t.Helper()
	var s sink
	f(&s)
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	var out []string
	for _, m := range s.all() {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		var ls []string
		for _, l := range pb.GetLabel() {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		v := pb.GetGauge().GetValue() + pb.GetCounter().GetValue()
		out = append(out, fq.FindStringSubmatch(m.Desc().String())[1]+"{"+strings.Join(ls, ",")+"} "+strconv.FormatFloat(v, 'g', -1, 64))
	}
	sort.Strings(out)
	return out
}

// TestRDMANetlinkOptIn: the opt-in series of a snapshot as rdmanl.Read
// returns it for the recorded hosts of internal/read/rdmanl's tests (mlx5_0
// of iproute2 96f59e7f capped at one process, mlx5_2/1 in auto type
// mode, a port cut at the object cap): process names and [module]s, never
// a PID; the cap and truncation said; a truncated port's counts absent.
func TestRDMANetlinkOptIn(t *testing.T) {
	c := NewRDMANetlinkCollector(Env{}).(*rdmaNetlinkCollector)
	s := &rdmanl.Snapshot{
		ProcessResources: []rdmanl.ProcessResources{
			{Device: "mlx5_0", Type: "qp", Objects: map[string]uint64{"[ib_core]": 3, "ibv_rc_pingpong": 1, "other": 1}, Capped: true},
			{Device: "mlx5_0", Type: "mr", Objects: map[string]uint64{}, Unnamed: 2, Capped: true, Truncated: true},
		},
		QPCounterModes: []rdmanl.QPCounterMode{{Device: "mlx5_0", Port: 1}, {Device: "mlx5_2", Port: 1, Mode: 1, Mask: 1}},
		QPCounters: []rdmanl.PortQPCounters{
			{Device: "mlx5_2", Port: 1, Counters: 1, QPs: 1, ByType: []rdmanl.QPTypeCounters{{QPType: "RC", QPs: 1, Counters: []rdmanl.Counter{{Name: "out_of_sequence"}}}}},
			{Device: "mlx5_3", Port: 1, Counters: 1, Truncated: true},
		},
	}
	got := series(t, func(out *sink) { c.optIn(out, s) })
	want := []string{
		"rdma_port_qp_counter_dump_truncated{device=mlx5_2,port=1} 0",
		"rdma_port_qp_counter_dump_truncated{device=mlx5_3,port=1} 1",
		"rdma_port_qp_counter_mode{criteria=,device=mlx5_0,mode=none,port=1} 1",
		"rdma_port_qp_counter_mode{criteria=type,device=mlx5_2,mode=auto,port=1} 1",
		"rdma_port_qp_counter_qps{device=mlx5_2,port=1} 1",
		"rdma_port_qp_counters{device=mlx5_2,port=1} 1",
		"rdma_port_qp_type_counter_total{counter=out_of_sequence,device=mlx5_2,port=1,qp_type=RC} 0",
		"rdma_resource_dump_truncated{device=mlx5_0,type=mr} 1",
		"rdma_resource_dump_truncated{device=mlx5_0,type=qp} 0",
		"rdma_resource_process_capped{device=mlx5_0} 1",
		"rdma_resource_process_objects{device=mlx5_0,process=[ib_core],type=qp} 3",
		"rdma_resource_process_objects{device=mlx5_0,process=ibv_rc_pingpong,type=qp} 1",
		"rdma_resource_process_objects{device=mlx5_0,process=other,type=qp} 1",
		"rdma_resource_process_unnamed_objects{device=mlx5_0,type=mr} 2",
		"rdma_resource_process_unnamed_objects{device=mlx5_0,type=qp} 0",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Off (the default): nothing.
	if got := series(t, func(out *sink) { c.optIn(out, &rdmanl.Snapshot{}) }); len(got) != 0 {
		t.Errorf("empty snapshot: %v", got)
	}
}

func TestRDMANetlinkFlags(t *testing.T) {
	f := DefaultFlags()
	o, err := f.RDMANetlink.Query()
	if err != nil || o.ProcessResources || o.QPCounters || o.MaxProcesses != rdmanl.DefaultMaxProcesses || o.MaxObjects != rdmanl.DefaultMaxObjects {
		t.Errorf("defaults %+v %v", o, err)
	}
	f.RDMANetlink.MaxProcesses = 0
	if _, err := f.RDMANetlink.Query(); err == nil || !strings.Contains(err.Error(), "max-processes") {
		t.Errorf("max-processes 0: %v", err)
	}
	f.RDMANetlink.MaxProcesses, f.RDMANetlink.MaxObjects = 1, -1
	if _, err := f.RDMANetlink.Query(); err == nil || !strings.Contains(err.Error(), "max-objects") {
		t.Errorf("max-objects -1: %v", err)
	}
}
