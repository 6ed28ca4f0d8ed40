// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pci"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

// pci.payload on the recorded CX-7s (MaxPayload 256, MaxReadReq 4096: pass),
// on a function whose config read returned 64 bytes (skip, needs root), on
// one whose DevCtl was lowered (warn, with the setpci remedy), and on a
// host whose tree has no config files (skip).
func TestPCIPayload(t *testing.T) {
	root := t.TempDir()
	hostfstest.CopyTree(t, filepath.Join(diagnosetest.Fixtures, "hgx-h100"), root)
	cfg := func(dev string) string { return filepath.Join(root, "sys/class/infiniband", dev, "device/config") }
	b, err := os.ReadFile(cfg("mlx5_1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg("mlx5_1"), b[:64], 0o644); err != nil {
		t.Fatal(err)
	}
	// DevCtl of the Express capability at 0x60: MaxPayload 128 (0),
	// MaxReadReq 256 (1).
	low := append([]byte(nil), b...)
	low[0x68], low[0x69] = 0x00, 0x10
	if err := os.WriteFile(cfg("mlx5_4"), low, 0o644); err != nil {
		t.Fatal(err)
	}
	r := evaluateHost(t, root, nil)
	numa := evaluateHost(t, filepath.Join(diagnosetest.Fixtures, "numa-remote"), nil)
	for _, w := range []struct {
		r        *diagnose.Report
		target   string
		sev      diagnose.Severity
		contains []string
	}{
		{r, "mlx5_0", diagnose.Pass, []string{"MaxPayload 256 bytes, MaxReadReq 4096 bytes (DevCap MaxPayload 512 bytes)", "0000:1a:00.0/config"}},
		{r, "mlx5_9", diagnose.Pass, []string{"MaxPayload 256 bytes, MaxReadReq 4096 bytes"}},
		{r, "mlx5_1", diagnose.Skip, []string{"needs root", "0000:3c:00.0/config", "CAP_SYS_ADMIN"}},
		{r, "mlx5_4", diagnose.Warn, []string{"MaxPayload 128 bytes, MaxReadReq 256 bytes", "BIOS", "setpci -s 0000:4d:00.0 CAP_EXP+0x8.w=5000:7000"}},
		{numa, "mlx5_0", diagnose.Skip, []string{"no /sys/bus/pci/devices/0000:98:00.0/config"}},
	} {
		f, ok := diagnosetest.ReportFinding(w.r, "pci.payload", w.target)
		if !ok {
			t.Errorf("%s: no finding", w.target)
			continue
		}
		if f.Severity != w.sev {
			t.Errorf("%s: %s, want %s (%s / %s)", w.target, f.Severity, w.sev, f.Observed, f.Evidence)
		}
		all := f.Observed + " " + f.Expected + " " + f.Evidence + " " + f.Remedy
		for _, c := range w.contains {
			if !strings.Contains(all, c) {
				t.Errorf("%s: %q not in %q", w.target, c, all)
			}
		}
	}
}

// A device that supports only 128-byte payloads is not asked for more;
// MaxReadReq alone below 512 warns with only the setpci fix.
func TestPayloadFinding(t *testing.T) {
	f := &pci.Function{Address: "0000:01:00.0", Payload: pci.Payload{Read: true,
		MaxPayloadSupported: sysattr.Some(128), MaxPayload: sysattr.Some(128), MaxReadRequest: sysattr.Some(512)}}
	if fd := payloadFinding("x", f); fd.Severity != diagnose.Pass || !strings.Contains(fd.Expected, "at least 128 bytes") {
		t.Errorf("128-byte device: %+v", fd)
	}
	f.Payload.MaxPayloadSupported = sysattr.Some(512)
	f.Payload.MaxPayload = sysattr.Some(256)
	f.Payload.MaxReadRequest = sysattr.Some(128)
	if fd := payloadFinding("x", f); fd.Severity != diagnose.Warn || strings.Contains(fd.Remedy, "BIOS") || !strings.Contains(fd.Remedy, "setpci") {
		t.Errorf("MRRS 128: %+v", fd)
	}
	f.Payload = pci.Payload{Read: true}
	if fd := payloadFinding("x", f); fd.Severity != diagnose.Skip || !strings.Contains(fd.Evidence, "no PCI Express capability") {
		t.Errorf("no Express capability: %+v", fd)
	}
}
