// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/subprocess"

	"github.com/rdma-doctor/rdma_doctor/internal/testenv"
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
	p, _ := filepath.Abs(filepath.Join("..", "..", "fixtures", "tools", name))
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
