// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package sm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/subprocess"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

func tool(t testing.TB, name string) []byte { return hostfstest.Tool(t, name) }

func TestParseSMInfo(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Info
		err  string
	}{
		{name: "master (ibsim)", in: string(tool(t, "sminfo-master-ibsim.txt")),
			want: Info{LID: 4, GUID: "0x0000000000100001", ActivityCount: 411, Priority: 14, State: StateMaster}},
		{name: "standby (ibsim)", in: string(tool(t, "sminfo-standby-ibsim.txt")),
			want: Info{LID: 5, GUID: "0x0000000000100003", ActivityCount: 176, Priority: 5, State: StateStandby}},
		{name: "after failover (ibsim)", in: string(tool(t, "sminfo-master-after-failover-ibsim.txt")),
			want: Info{LID: 5, GUID: "0x0000000000100003", ActivityCount: 381, Priority: 5, State: StateMaster}},
		{name: "research doc form", in: "sminfo: sm lid 1 sm guid 0x0002c90300a1b2c3, activity count 123456 priority 14 state 3 SMINFO_MASTER\n",
			want: Info{LID: 1, GUID: "0x0002c90300a1b2c3", ActivityCount: 123456, Priority: 14, State: StateMaster}},
		{name: "discovering, warnings before", in: "ibwarn: something\nsminfo: sm lid 7 sm guid 0xabc, activity count 0 priority 0 state 1 SMINFO_DISCOVER\n",
			want: Info{LID: 7, GUID: "0x0000000000000abc", State: StateDiscovering}},
		{name: "empty", in: "", err: "printed nothing"},
		{name: "no answer line", in: "sminfo: iberror: failed: query\n", err: "no \"sminfo: sm lid\" line"},
		{name: "bad state", in: "sminfo: sm lid 1 sm guid 0x1, activity count 5 priority 1 state 7 ???", err: "bad state"},
		{name: "state name mismatch", in: "sminfo: sm lid 1 sm guid 0x1, activity count 5 priority 1 state 3 SMINFO_STANDBY", err: "does not match"},
		{name: "priority out of range", in: "sminfo: sm lid 1 sm guid 0x1, activity count 5 priority 16 state 3 SMINFO_MASTER", err: "bad priority"},
		{name: "guid without comma", in: "sminfo: sm lid 1 sm guid 0x1 activity count 5 priority 1 state 3 SMINFO_MASTER", err: "bad guid"},
		{name: "truncated", in: "sminfo: sm lid 1 sm guid 0x1, activity", err: "not in sminfo's format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSMInfo([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if StateMaster.String() != "MASTER" || State(9).String() != "UNKNOWN" {
		t.Error("state names")
	}
}

func FuzzParseSMInfo(f *testing.F) {
	for _, n := range []string{"sminfo-master-ibsim.txt", "sminfo-standby-ibsim.txt", "sminfo-master-after-failover-ibsim.txt", "sminfo-sm-stopped-ibsim.combined.txt"} {
		f.Add(tool(f, n))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := ParseSMInfo(b)
		if err == nil && (info.State < 0 || info.State > 3 || info.Priority > 15 || len(info.GUID) != 18) {
			t.Fatalf("accepted %+v", info)
		}
	})
}

// fake writes an executable that stands in for sminfo. It records its
// arguments and then runs body (replay a recording, hang, fail).
func fake(t *testing.T, body string) (path, argsFile string) {
	t.Helper()
	dir := t.TempDir()
	path = filepath.Join(dir, "sminfo")
	argsFile = filepath.Join(dir, "args")
	if err := os.WriteFile(path, []byte("#!/bin/sh\necho \"$@\" >>"+argsFile+"\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, argsFile
}

func fixed(ts ...Target) func(context.Context) ([]Target, error) {
	return func(context.Context) ([]Target, error) { return ts, nil }
}

func TestRunnerReplaysAndDetectsStall(t *testing.T) {
	// Each run prints the next activity count from a counter file: 411,
	// 412, then 412 again (stalled), then another SM (failover).
	dir := t.TempDir()
	counter := filepath.Join(dir, "n")
	path, argsFile := fake(t, `n=$(cat `+counter+` 2>/dev/null || echo 0); echo $((n+1)) >`+counter+`
case $n in
0) echo "sminfo: sm lid 4 sm guid 0x100001, activity count 411 priority 14 state 3 SMINFO_MASTER";;
1|2) echo "sminfo: sm lid 4 sm guid 0x100001, activity count 412 priority 14 state 3 SMINFO_MASTER";;
*) cat `+filepath.Join("..", "..", "..", "fixtures", "tools", "sminfo-master-after-failover-ibsim.txt")+`;;
esac
`)
	r := NewRunner(RunnerConfig{Path: path, Targets: fixed(Target{"mlx5_0", 1})})
	wantStalled := []bool{false, false, true, false}
	for i, want := range wantStalled {
		r.RunOnce(context.Background())
		st := r.Status()
		if len(st.Ports) != 1 {
			t.Fatalf("round %d: ports %+v", i, st.Ports)
		}
		p := st.Ports[0]
		if !p.OK || !p.HaveInfo || p.Stalled != want || p.Runs != uint64(i+1) {
			t.Errorf("round %d: %+v, want stalled=%v", i, p, want)
		}
	}
	if p := r.Status().Ports[0]; p.Info.GUID != "0x0000000000100003" || p.Info.LID != 5 {
		t.Errorf("after failover: %+v", p.Info)
	}
	args, _ := os.ReadFile(argsFile)
	if !strings.HasPrefix(string(args), "-C mlx5_0 -P 1\n") {
		t.Errorf("sminfo arguments: %q", args)
	}
}

func TestRunnerFailureKeepsLastAnswer(t *testing.T) {
	dir := t.TempDir()
	flag := filepath.Join(dir, "fail")
	path, _ := fake(t, `if [ -e `+flag+` ]; then cat `+filepath.Join("..", "..", "..", "fixtures", "tools", "sminfo-sm-stopped-ibsim.combined.txt")+` >&2; exit 255; fi
cat `+filepath.Join("..", "..", "..", "fixtures", "tools", "sminfo-master-ibsim.txt")+"\n")
	r := NewRunner(RunnerConfig{Path: path, Targets: fixed(Target{"mlx5_0", 1})})
	r.RunOnce(context.Background())
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r.RunOnce(context.Background())
	p := r.Status().Ports[0]
	if p.OK || p.Err == nil || !strings.Contains(p.Err.Error(), "sminfo: iberror: failed: query") {
		t.Errorf("err = %v", p.Err)
	}
	if !p.HaveInfo || p.Info.LID != 4 || p.Failures != 1 || p.Runs != 2 || p.LastSuccess.IsZero() {
		t.Errorf("status after failure = %+v", p)
	}
}

func TestRunnerHungSminfoKilled(t *testing.T) {
	dir := t.TempDir()
	path, _ := fake(t, "echo $$ >"+dir+"/pid\nexec sleep 1000\n")
	r := NewRunner(RunnerConfig{Path: path, Timeout: 200 * time.Millisecond, Targets: fixed(Target{"mlx5_0", 1}, Target{"mlx5_1", 1})})
	r.RunOnce(context.Background())
	st := r.Status()
	if len(st.Ports) != 2 {
		t.Fatalf("ports = %+v", st.Ports)
	}
	for _, p := range st.Ports {
		if p.OK || !errors.Is(p.Err, subprocess.ErrTimeout) {
			t.Errorf("%s: err = %v, want a timeout", p.Target, p.Err)
		}
	}
	b, _ := os.ReadFile(dir + "/pid")
	if _, err := os.Stat("/proc/" + strings.TrimSpace(string(b))); err == nil {
		t.Errorf("hung sminfo %s still exists", b)
	}
}

func TestRunnerMalformedOutput(t *testing.T) {
	path, _ := fake(t, "echo 'sminfo: sm lid x sm guid'\n")
	r := NewRunner(RunnerConfig{Path: path, Targets: fixed(Target{"mlx5_0", 1})})
	r.RunOnce(context.Background())
	if p := r.Status().Ports[0]; p.OK || p.Err == nil || p.HaveInfo {
		t.Errorf("%+v", p)
	}
}

func TestRunnerDropsOldTargets(t *testing.T) {
	path, _ := fake(t, "cat "+filepath.Join("..", "..", "..", "fixtures", "tools", "sminfo-master-ibsim.txt")+"\n")
	targets := []Target{{"mlx5_0", 1}, {"mlx5_1", 1}}
	r := NewRunner(RunnerConfig{Path: path, Targets: func(context.Context) ([]Target, error) { return targets, nil }})
	r.RunOnce(context.Background())
	targets = targets[1:]
	r.RunOnce(context.Background())
	if st := r.Status(); len(st.Ports) != 1 || st.Ports[0].Device != "mlx5_1" || st.Rounds != 2 {
		t.Errorf("%+v", st)
	}
}

// TestRealSminfoNoDevice runs Debian's sminfo (infiniband-diags) on this
// machine, which has no RDMA device: it must fail cleanly, with its own
// message, through the same runner.
func TestRealSminfoNoDevice(t *testing.T) {
	path := testenv.RequireTool(t, "sminfo", "sminfo not installed (apt-get install infiniband-diags)")
	if _, err := os.Stat("/sys/class/infiniband_mad/abi_version"); err == nil {
		t.Skip("this machine has ib_umad: the no-device path cannot be shown here")
	}
	r := NewRunner(RunnerConfig{Path: path, Timeout: 30 * time.Second, Targets: fixed(Target{"mlx5_0", 1})})
	r.RunOnce(context.Background())
	p := r.Status().Ports[0]
	if p.OK || p.Err == nil || !strings.Contains(p.Err.Error(), "Failed to open 'mlx5_0' port '1'") {
		t.Errorf("real sminfo: %+v (err %v)", p, p.Err)
	}
}

func writeTree(t *testing.T, files map[string]string) hostfs.FS {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return hostfs.Dir(root)
}

func port(dev string, n int, ll, state, phys, smLID string) map[string]string {
	d := "class/infiniband/" + dev + "/ports/" + string(rune('0'+n)) + "/"
	return map[string]string{
		"class/infiniband/" + dev + "/node_type":      "1: CA",
		"class/infiniband/" + dev + "/node_guid":      "0002:c903:0031:fdc0",
		"class/infiniband/" + dev + "/sys_image_guid": "0002:c903:0031:fdc0",
		d + "link_layer": ll, d + "state": state, d + "phys_state": phys, d + "sm_lid": smLID,
		d + "rate": "100 Gb/sec (4X EDR)",
	}
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestTargets(t *testing.T) {
	sys := writeTree(t, merge(
		port("mlx5_0", 1, "InfiniBand", "4: ACTIVE", "5: LinkUp", "0x1"),
		port("mlx5_1", 1, "InfiniBand", "2: INIT", "5: LinkUp", "0x0"),
		port("mlx5_2", 1, "Ethernet", "4: ACTIVE", "5: LinkUp", "0x0"),
		port("mlx5_3", 1, "InfiniBand", "4: ACTIVE", "5: LinkUp", "0x1"),
		port("mlx5_4", 1, "InfiniBand", "4: ACTIVE", "5: LinkUp", "0x1"),
		map[string]string{
			"class/infiniband_mad/abi_version": "5",
			"class/infiniband_mad/umad0/ibdev": "mlx5_0", "class/infiniband_mad/umad0/port": "1",
			"class/infiniband_mad/umad1/ibdev": "mlx5_1", "class/infiniband_mad/umad1/port": "1",
			"class/infiniband_mad/umad2/ibdev": "mlx5_2", "class/infiniband_mad/umad2/port": "1",
			"class/infiniband_mad/umad3/ibdev": "mlx5_4", "class/infiniband_mad/umad3/port": "1",
			"class/infiniband_mad/issm0/ibdev": "mlx5_0", "class/infiniband_mad/issm0/port": "1",
		}))
	// mlx5_1 is INIT, mlx5_2 RoCE, mlx5_3 has no umad, mlx5_4 is excluded.
	class := func(ctx context.Context) (*infiniband.Class, error) {
		return infiniband.Read(ctx, sys, func(d string) bool { return d != "mlx5_4" })
	}
	got, err := Targets(context.Background(), sys, class)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != (Target{"mlx5_0", 1}) {
		t.Errorf("targets = %v", got)
	}

	// TargetsOn also wants the device node below the root: none, then
	// only umad0's.
	root := t.TempDir()
	host := hostfs.Host{Sys: sys, Root: hostfs.Dir(root)}
	all := func(ctx context.Context) (*infiniband.Class, error) { return infiniband.Read(ctx, sys, nil) }
	if _, err := TargetsOn(context.Background(), host, all); !errors.Is(err, ErrNoUmadDevice) {
		t.Errorf("no /dev/infiniband: err = %v, want ErrNoUmadDevice", err)
	}
	if err := os.MkdirAll(filepath.Join(root, "dev/infiniband"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"umad3", "issm0", "uverbs0"} {
		if err := os.WriteFile(filepath.Join(root, "dev/infiniband", n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := TargetsOn(context.Background(), host, all); err != nil || len(got) != 1 || got[0] != (Target{"mlx5_4", 1}) {
		t.Errorf("TargetsOn with only umad3 = %v, %v; want [mlx5_4/1]", got, err)
	}

	noUmad := writeTree(t, port("mlx5_0", 1, "InfiniBand", "4: ACTIVE", "5: LinkUp", "0x1"))
	if _, err := Targets(context.Background(), noUmad, func(ctx context.Context) (*infiniband.Class, error) { return infiniband.Read(ctx, noUmad, nil) }); !errors.Is(err, ErrNoUmad) {
		t.Errorf("err = %v, want ErrNoUmad", err)
	}
}

func TestPortHasSM(t *testing.T) {
	enum := func(s string) infiniband.Opt[infiniband.Enum] {
		e, _ := infiniband.ParseEnum(s)
		return infiniband.Opt[infiniband.Enum]{V: e, OK: true}
	}
	ib := infiniband.Opt[string]{V: "InfiniBand", OK: true}
	eth := infiniband.Opt[string]{V: "Ethernet", OK: true}
	lid := func(v uint64) infiniband.Opt[uint64] { return infiniband.Opt[uint64]{V: v, OK: true} }
	tests := []struct {
		name        string
		p           infiniband.Port
		has, judged bool
	}{
		{"active with SM", infiniband.Port{LinkLayer: ib, State: enum("4: ACTIVE"), PhysState: enum("5: LinkUp"), SMLID: lid(1)}, true, true},
		{"armed with SM", infiniband.Port{LinkLayer: ib, State: enum("3: ARMED"), PhysState: enum("5: LinkUp"), SMLID: lid(1)}, true, true},
		{"LinkUp but INIT", infiniband.Port{LinkLayer: ib, State: enum("2: INIT"), PhysState: enum("5: LinkUp"), SMLID: lid(0)}, false, true},
		{"INIT with a stale SM LID", infiniband.Port{LinkLayer: ib, State: enum("2: INIT"), PhysState: enum("5: LinkUp"), SMLID: lid(1)}, false, true},
		{"active, SM LID 0", infiniband.Port{LinkLayer: ib, State: enum("4: ACTIVE"), PhysState: enum("5: LinkUp"), SMLID: lid(0)}, false, true},
		{"RoCE", infiniband.Port{LinkLayer: eth, State: enum("4: ACTIVE"), PhysState: enum("5: LinkUp"), SMLID: lid(0)}, false, false},
		{"link down", infiniband.Port{LinkLayer: ib, State: enum("1: DOWN"), PhysState: enum("2: Polling"), SMLID: lid(0)}, false, false},
		{"state unreadable", infiniband.Port{LinkLayer: ib, PhysState: enum("5: LinkUp"), SMLID: lid(1)}, false, false},
		// Kernels before link_layer (2.6.37) had InfiniBand ports only.
		{"no link_layer", infiniband.Port{State: enum("4: ACTIVE"), PhysState: enum("5: LinkUp"), SMLID: lid(1)}, true, true},
	}
	for _, tt := range tests {
		has, judged := PortHasSM(&tt.p)
		if has != tt.has || judged != tt.judged {
			t.Errorf("%s: PortHasSM = %v %v, want %v %v", tt.name, has, judged, tt.has, tt.judged)
		}
	}
}
