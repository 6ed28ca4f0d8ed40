// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/subprocess"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

// fakeIblinkinfo writes an executable standing in for iblinkinfo.
func fakeIblinkinfo(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "iblinkinfo")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func fixturePath(name string) string {
	p, _ := filepath.Abs(filepath.Join("..", "..", "..", "fixtures", "tools", name))
	return p
}

func TestRunnerReplayThenFailKeepsFabric(t *testing.T) {
	dir := t.TempDir()
	flag := filepath.Join(dir, "fail")
	args := filepath.Join(dir, "args")
	p := fakeIblinkinfo(t, `echo "$@" >`+args+`
if [ -e `+flag+` ]; then cat `+fixturePath("iblinkinfo-no-umad-debian.combined.txt")+` >&2; exit 1; fi
cat `+fixturePath("iblinkinfo-l-generated-hdr-fdr-downgrade.txt")+"\n")
	r := NewRunner(RunnerConfig{Path: p, Args: Args("mlx5_0", 1)})
	r.RunOnce(context.Background())
	st := r.Status()
	if !st.OK || st.Fabric == nil || len(st.Fabric.Links) != 8 || st.Fabric.Degraded() != 2 {
		t.Fatalf("status = %+v", st)
	}
	if b, _ := os.ReadFile(args); strings.TrimSpace(string(b)) != "--line -C mlx5_0 -P 1" {
		t.Errorf("args = %q", b)
	}
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r.RunOnce(context.Background())
	st = r.Status()
	if st.OK || st.Err == nil || !strings.Contains(st.Err.Error(), "Failed to open (null) port 0") {
		t.Errorf("err = %v", st.Err)
	}
	if st.Fabric == nil || len(st.Fabric.Links) != 8 || st.Scans != 2 || st.Failures != 1 {
		t.Errorf("a failed scan must keep the last fabric: %+v", st)
	}
}

func TestRunnerHungKilled(t *testing.T) {
	dir := t.TempDir()
	// Prints part of a fabric, then hangs.
	p := fakeIblinkinfo(t, "echo $$ >"+dir+"/pid\nhead -3 "+fixturePath("iblinkinfo-l-ibsim.txt")+"\nexec sleep 1000\n")
	r := NewRunner(RunnerConfig{Path: p, Timeout: 300 * time.Millisecond})
	r.RunOnce(context.Background())
	st := r.Status()
	if st.OK || !errors.Is(st.Err, subprocess.ErrTimeout) || st.Fabric != nil {
		t.Errorf("status = %+v", st)
	}
	b, _ := os.ReadFile(dir + "/pid")
	if _, err := os.Stat("/proc/" + strings.TrimSpace(string(b))); err == nil {
		t.Errorf("hung iblinkinfo %s still exists", b)
	}
}

func TestRunnerNotLineMode(t *testing.T) {
	p := fakeIblinkinfo(t, "cat "+fixturePath("iblinkinfo-sb7700-edr-linpack.txt")+"\n")
	r := NewRunner(RunnerConfig{Path: p})
	r.RunOnce(context.Background())
	if st := r.Status(); st.OK || !errors.Is(st.Err, ErrNotLineMode) {
		t.Errorf("status = %+v", st)
	}
}

// TestRealIblinkinfoNoDevice runs Debian's iblinkinfo on this machine,
// which has no RDMA device.
func TestRealIblinkinfoNoDevice(t *testing.T) {
	path := testenv.RequireTool(t, "iblinkinfo", "iblinkinfo not installed (apt-get install infiniband-diags)")
	if _, err := os.Stat("/sys/class/infiniband_mad/abi_version"); err == nil {
		t.Skip("this machine has ib_umad: the no-device path cannot be shown here")
	}
	r := NewRunner(RunnerConfig{Path: path, Timeout: 30 * time.Second})
	r.RunOnce(context.Background())
	st := r.Status()
	if st.OK || st.Err == nil || !strings.Contains(st.Err.Error(), "exit status 1: Failed to open (null) port 0") {
		t.Errorf("real iblinkinfo: %+v (err %v)", st, st.Err)
	}
}

// TestRunnerEndlessOutputKilled: an iblinkinfo that prints valid links
// without end is killed at the output cap (its hour-long timeout plays no
// part), the scan fails saying so, and the previous scan's fabric stays.
func TestRunnerEndlessOutputKilled(t *testing.T) {
	dir := t.TempDir()
	flag := filepath.Join(dir, "endless")
	fixture := fixturePath("iblinkinfo-l-generated-hdr-fdr-downgrade.txt")
	p := fakeIblinkinfo(t, `echo $$ >`+dir+`/pid
if [ -e `+flag+` ]; then while :; do cat `+fixture+`; done; fi
cat `+fixture+"\n")
	r := NewRunner(RunnerConfig{Path: p, Timeout: time.Hour, MaxOutput: 256 << 10})
	r.RunOnce(context.Background())
	if st := r.Status(); !st.OK || st.Fabric == nil || len(st.Fabric.Links) != 8 {
		t.Fatalf("first scan: %+v", st)
	}
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r.RunOnce(context.Background())
	st := r.Status()
	if st.OK || !errors.Is(st.Err, subprocess.ErrOutputTooLarge) || !strings.Contains(st.Err.Error(), "more than 262144 bytes on standard output") {
		t.Errorf("endless scan: ok %v, err %v", st.OK, st.Err)
	}
	if st.Fabric == nil || len(st.Fabric.Links) != 8 || st.Failures != 1 {
		t.Errorf("the failed scan must keep the last fabric: %+v", st)
	}
	b, _ := os.ReadFile(dir + "/pid")
	if _, err := os.Stat("/proc/" + strings.TrimSpace(string(b))); err == nil {
		t.Errorf("endless iblinkinfo %s still exists", b)
	}
}

// TestDefaultMaxOutputFitsLargeFabric: the default cap holds a 40,000-link
// fabric in --line format with every link printed from both ends and node
// descriptions at their 64-byte maximum, with at least twice that to
// spare; and the parser reads all of it.
func TestDefaultMaxOutputFitsLargeFabric(t *testing.T) {
	const links = 40000
	out := largeFabric(links)
	if 2*len(out) > DefaultMaxOutput {
		t.Errorf("a %d-link fabric is %d bytes: less than twice that fits in DefaultMaxOutput %d", links, len(out), DefaultMaxOutput)
	}
	fab, err := Parse(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(fab.Links) != links || fab.Malformed != 0 {
		t.Errorf("parsed %d links (%d malformed lines), want %d", len(fab.Links), fab.Malformed, links)
	}
}

// largeFabric is iblinkinfo --line output for n switch-to-switch links,
// 32 per switch pair, each printed once from each end.
func largeFabric(n int) []byte {
	desc := func(kind string, i int) string {
		s := fmt.Sprintf("MF0;%s%05d:MQM9790/U1", kind, i)
		return s + strings.Repeat("x", 64-len(s))
	}
	line := func(b *bytes.Buffer, guid uint64, d string, lid, port int, rguid uint64, rlid, rport int, rd string) {
		fmt.Fprintf(b, "0x%016x %q %6d %4d[  ] ==( 4X        106.25 Gbps Active/  LinkUp)==>  0x%016x %6d %4d[  ] %q ( )\n",
			guid, d, lid, port, rguid, rlid, rport, rd)
	}
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		leaf, spine, port := i/32, i/32, i%32+1
		lg, sg := uint64(0x1070fd0300000000)+uint64(leaf), uint64(0x1070fd0400000000)+uint64(spine)
		line(&b, lg, desc("leaf", leaf), 1+leaf, port, sg, 40000+spine, port, desc("spine", spine))
		line(&b, sg, desc("spine", spine), 40000+spine, port, lg, 1+leaf, port, desc("leaf", leaf))
	}
	return b.Bytes()
}

// TestRunnerExitZeroLies: iblinkinfo exits 0 after printing only an error
// (or nothing at all); that is a failed scan, which keeps the previous
// fabric, never a clean empty one. With port lines and an error it is a
// failed scan whose (partial) fabric is exported. umad2sim's attach notice
// on stderr is not an error.
func TestRunnerExitZeroLies(t *testing.T) {
	dir := t.TempDir()
	mode := filepath.Join(dir, "mode")
	p := fakeIblinkinfo(t, `cat `+iqeFixture("ibsim16-errors.stderr")+` >&2
case "$(cat `+mode+` 2>/dev/null)" in
error) echo "ibwarn: [1234] mad_rpc: _do_madrpc failed; dport (DR path slid 0; dlid 0; 0,1,3)" >&2; exit 0 ;;
empty) exit 0 ;;
partial) head -3 `+fixturePath("iblinkinfo-l-ibsim.txt")+`; echo "ibwarn: [1234] mad_rpc: _do_madrpc failed; dport (DR path slid 0; dlid 0; 0,1,3)" >&2; exit 0 ;;
esac
cat `+fixturePath("iblinkinfo-l-ibsim.txt")+"\n")
	r := NewRunner(RunnerConfig{Path: p})
	r.RunOnce(context.Background())
	if st := r.Status(); !st.OK || st.Fabric == nil {
		t.Fatalf("good scan with umad2sim's notice on stderr: %+v", st)
	}
	for _, m := range []string{"error", "empty"} {
		if err := os.WriteFile(mode, []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
		r.RunOnce(context.Background())
		st := r.Status()
		if st.OK || st.Err == nil || st.Fabric == nil || len(st.Fabric.Links) == 0 {
			t.Errorf("%s, exit 0: OK %v err %v; want a failure that keeps the previous fabric", m, st.OK, st.Err)
		}
	}
	full := len(r.Status().Fabric.Links)
	fullPorts := len(r.Status().Fabric.PortLines)
	if err := os.WriteFile(mode, []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.RunOnce(context.Background())
	st := r.Status()
	if st.OK || st.Err == nil || st.Fabric == nil || len(st.Fabric.Links) >= full || st.Fabric.Ports != 3 {
		t.Errorf("partial scan: OK %v err %v fabric %v; want a failure exporting the 3 ports it read", st.OK, st.Err, st.Fabric.Describe())
	}
	// The nodes it did not reach keep their ports, marked stale.
	stale := 0
	for _, p := range st.Fabric.PortLines {
		if p.Stale {
			stale++
		}
	}
	if len(st.Fabric.PortLines) != fullPorts || stale == 0 || stale >= fullPorts {
		t.Errorf("partial scan: %d port lines (%d stale), want the previous %d", len(st.Fabric.PortLines), stale, fullPorts)
	}
}

// TestRunnerScanned: the channel the counter sweep waits on closes with
// the first successful scan, not with a failed one.
func TestRunnerScanned(t *testing.T) {
	flag := filepath.Join(t.TempDir(), "ok")
	p := fakeIblinkinfo(t, `[ -e `+flag+` ] || { echo "iblinkinfo: iberror: failed: discover" >&2; exit 255; }
cat `+fixturePath("iblinkinfo-l-ibsim.txt")+"\n")
	r := NewRunner(RunnerConfig{Path: p})
	r.RunOnce(context.Background())
	select {
	case <-r.Scanned():
		t.Fatal("Scanned closed by a failed scan")
	default:
	}
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r.RunOnce(context.Background())
	r.RunOnce(context.Background()) // closing twice would panic
	select {
	case <-r.Scanned():
	default:
		t.Fatal("Scanned still open after a good scan")
	}
}
