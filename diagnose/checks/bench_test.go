// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package checks

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
	"github.com/rdma-doctor/rdma_doctor/diagnose/report"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
)

// generateHost writes a host root with n RDMA devices into dir, each a
// clone of the dgx-h100 fixture's mlx5_0 (an NDR ConnectX-7 with the full
// counters/ and hw_counters/ sets) on its own PCI function, in the kernel's
// layout (class entries are relative symlinks into sys/devices). The
// template host's sys/devices/system and proc/ are copied as they are.
func generateHost(tb testing.TB, dir string, n int) string {
	tb.Helper()
	tmpl := filepath.Join(diagnosetest.Fixtures, "dgx-h100")
	devDir, err := filepath.EvalSymlinks(filepath.Join(tmpl, "sys/class/infiniband/mlx5_0"))
	if err != nil {
		tb.Fatal(err)
	}
	pciDir := filepath.Dir(filepath.Dir(devDir))
	for i := 0; i < n; i++ {
		root := 0x10 + i*0x0f
		bdf := fmt.Sprintf("0000:%02x:00.0", root+1)
		rel := fmt.Sprintf("devices/pci0000:%02x/0000:%02x:01.0/%s", root, root, bdf)
		pci := filepath.Join(dir, "sys", rel)
		copyFiles(tb, pciDir, pci, false)
		name := fmt.Sprintf("mlx5_%d", i)
		dev := filepath.Join(pci, "infiniband", name)
		copyFiles(tb, devDir, dev, true)
		mustSymlink(tb, "../../../"+bdf, filepath.Join(dev, "device"))
		mustSymlink(tb, "../../"+rel+"/infiniband/"+name, filepath.Join(dir, "sys/class/infiniband", name))
		mustSymlink(tb, "../../../"+rel, filepath.Join(dir, "sys/bus/pci/devices", bdf))
	}
	for _, sub := range []string{"sys/devices/system", "proc"} {
		if _, err := os.Stat(filepath.Join(tmpl, sub)); err == nil {
			copyFiles(tb, filepath.Join(tmpl, sub), filepath.Join(dir, sub), true)
		}
	}
	return dir
}

// copyFiles copies the regular files of src into dst, recursing into
// directories when deep; symlinks are not copied.
func copyFiles(tb testing.TB, src, dst string, deep bool) {
	tb.Helper()
	entries, err := os.ReadDir(src)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		tb.Fatal(err)
	}
	for _, e := range entries {
		s, d := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		switch {
		case e.Type()&fs.ModeSymlink != 0:
		case e.IsDir():
			if deep {
				copyFiles(tb, s, d, true)
			}
		default:
			b, err := os.ReadFile(s)
			if err != nil {
				tb.Fatal(err)
			}
			if err := os.WriteFile(d, b, 0o644); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

func mustSymlink(tb testing.TB, target, link string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		tb.Fatal(err)
	}
}

func TestGenerateHost(t *testing.T) {
	root := generateHost(t, t.TempDir(), 16)
	r := evaluateHost(t, root, nil)
	f, ok := diagnosetest.ReportFinding(r, "dev.present", "host")
	if !ok || f.Observed != "16 readable RDMA device(s)" {
		t.Fatalf("generated host: %+v", f)
	}
	if f, _ := diagnosetest.ReportFinding(r, "port.rate", "mlx5_15/1"); f.Severity != diagnose.Pass {
		t.Errorf("port.rate on a generated device: %+v", f)
	}
	if r.Summary.Fail != 0 {
		t.Errorf("generated host fails: %+v", r.Summary)
	}
}

// benchHosts are the hosts of the benchmarks: the DGX fixture (9 devices)
// and a generated 16-device host.
func benchHosts(b *testing.B) map[string]string {
	return map[string]string{
		"dgx-h100":   filepath.Join(diagnosetest.Fixtures, "dgx-h100"),
		"16-devices": generateHost(b, b.TempDir(), 16),
	}
}

// BenchmarkEvaluate is the checks alone on a snapshot with a two-sample
// history: what every sampler tick costs beyond reading the host.
func BenchmarkEvaluate(b *testing.B) {
	for name, root := range benchHosts(b) {
		b.Run(name, func(b *testing.B) {
			e, err := testEvaluator(&config.Config{}, nil)
			if err != nil {
				b.Fatal(err)
			}
			rd := &diagnose.Reader{Host: diagnosetest.HostOf(root)}
			h := diagnose.HistoryFor(10*time.Minute, 30*time.Second)
			s := rd.Read(context.Background())
			h.Add(s)
			s2 := rd.Read(context.Background())
			s2.Time = s.Time.Add(30 * time.Second)
			h.Add(s2)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for b.Loop() {
				e.Evaluate(s2, h)
			}
			reportCPU(b, cpu)
		})
	}
}

// BenchmarkSample is one full sampler tick: read every source of the host,
// record the counters, evaluate every check.
func BenchmarkSample(b *testing.B) {
	for name, root := range benchHosts(b) {
		b.Run(name, func(b *testing.B) {
			e, err := testEvaluator(&config.Config{}, nil)
			if err != nil {
				b.Fatal(err)
			}
			now := diagnosetest.T0
			s := &diagnose.Sampler{Reader: &diagnose.Reader{Host: diagnosetest.HostAt(root, nil, func() time.Time { now = now.Add(30 * time.Second); return now })},
				Eval: e, History: diagnose.HistoryFor(10*time.Minute, 30*time.Second), Interval: 30 * time.Second}
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				s.Sample(context.Background())
			}
			reportCPU(b, cpu)
		})
	}
}

// cpuTime is the process' user+system CPU time: on the shared build machine
// wall time mostly measures the other builds, CPU time what a sample costs.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkRender is what one /diagnose request costs: rendering the
// latest report (the host is not read).
func BenchmarkRender(b *testing.B) {
	r := evaluateHost(b, filepath.Join(diagnosetest.Fixtures, "dgx-h100"), func() {})
	for _, format := range report.Formats {
		b.Run(format, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := report.Render(io.Discard, r, format, report.View{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
