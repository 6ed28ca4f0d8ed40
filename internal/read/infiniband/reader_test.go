// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package infiniband

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
)

// A Reader reads static attributes once and live ones every time, and
// gives what a cacheless read gives.
func TestReaderCachesStatic(t *testing.T) {
	sys := &hostfstest.Faulty{Base: fixtureSys("dgx-h100")}
	now := time.Unix(1000, 0)
	r := NewReader(sys, nil, time.Minute, func() time.Time { return now })
	first, err := r.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	second, err := r.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, second) || !reflect.DeepEqual(first, readClass(t, fixtureSys("dgx-h100"), nil)) {
		t.Error("cached read differs from a fresh one")
	}
	dev := ClassDir + "/mlx5_0"
	for file, want := range map[string]int{dev + "/fw_ver": 1, dev + "/ports/1/link_layer": 1,
		dev + "/ports/1/state": 2, dev + "/ports/1/counters/symbol_error": 2, dev + "/ports/1/cap_mask": 2} {
		if n := sys.Reads(file); n != want {
			t.Errorf("%s read %d times in two reads, want %d", file, n, want)
		}
	}
	now = now.Add(time.Minute)
	if _, err := r.Read(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := sys.Reads(dev + "/fw_ver"); n != 2 {
		t.Errorf("fw_ver read %d times after the age bound, want 2", n)
	}
}

// A re-registered device (a new directory) is read afresh, a vanished one
// is dropped, a new one is picked up: never a stale attribute.
func TestReaderDeviceChanges(t *testing.T) {
	root := t.TempDir()
	if out, err := exec.Command("cp", "-a", "../../../fixtures/hosts/cx6-hdr-fdr/sys", root).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	sys := hostfs.Dir(filepath.Join(root, "sys"))
	r := NewReader(sys, nil, time.Hour, nil)
	c, err := r.Read(context.Background())
	if err != nil || len(c.Devices) != 2 {
		t.Fatalf("%v, %d devices", err, len(c.Devices))
	}
	// Re-register mlx5_0 with new firmware: a new link and directory.
	dir := hostfstest.Reregister(t, filepath.Join(root, "sys"), "mlx5_0")
	if err := os.WriteFile(filepath.Join(dir, "fw_ver"), []byte("20.99.9999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, "sys", ClassDir, "mlx5_1")); err != nil {
		t.Fatal(err)
	}
	c, err = r.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Devices) != 1 || c.Devices[0].Name != "mlx5_0" || c.Devices[0].FirmwareVer != some("20.99.9999") {
		t.Errorf("after re-registration: %d devices, %+v", len(c.Devices), c.Devices[0].FirmwareVer)
	}
}

// A static attribute the driver refuses (a restricted function's EINVAL)
// is an error in the read that met it, and a remembered refusal
// (hostfs.ErrRefused) while the cached static part is served again: the
// collector then does not fail on every scrape.
func TestReaderRefusedStatic(t *testing.T) {
	dev := ClassDir + "/mlx5_0"
	sys := &hostfstest.Faulty{Base: fixtureSys("dgx-h100"), Errors: map[string]error{dev + "/fw_ver": syscall.EINVAL}}
	r := NewReader(sys, nil, time.Hour, time.Now)
	refusals := func(c *Class) (fresh, remembered int) {
		for _, err := range c.Errors() {
			switch {
			case errors.Is(err, hostfs.ErrRefused):
				remembered++
			case errors.Is(err, syscall.EINVAL):
				fresh++
			}
		}
		return
	}
	first, _ := r.Read(context.Background())
	if f, m := refusals(first); f != 1 || m != 0 {
		t.Errorf("first read: %d refusals, %d remembered; want 1, 0", f, m)
	}
	second, _ := r.Read(context.Background())
	if f, m := refusals(second); f != 0 || m != 1 {
		t.Errorf("second read: %d refusals, %d remembered; want 0, 1", f, m)
	}
	if n := sys.Reads(dev + "/fw_ver"); n != 1 {
		t.Errorf("fw_ver asked %d times, want once", n)
	}
}
