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

// The rail and GPUDirect checks on the GPU fixture hosts: the recorded
// H100 tree passes on every rail with nvidia_peermem registered; without
// the rail-2 HCA and with peermem unregistered under the proprietary
// module, GPU2 and the host fail with a remedy naming the fix; on the
// recorded EPYC host, whose GPUs and HCAs share no switch, every rail fails
// with the remedy of a switchless board and ACS is not judged; a host
// without GPUs skips both.
func TestGPUChecks(t *testing.T) {
	good := evaluateHost(t, filepath.Join(diagnosetest.Fixtures, "hgx-h100"), nil)
	bad := evaluateHost(t, filepath.Join(diagnosetest.Fixtures, "hgx-h100-nogdr"), nil)
	// Rail 1's CX-7 swapped with switch 0's CX-6 Dx: GPU0's switch holds
	// mlx5_0 and mlx5_1, GPU1's none.
	swapped := evaluateHost(t, filepath.Join(diagnosetest.Fixtures, "hgx-h100-swapped"), nil)
	none := evaluateHost(t, filepath.Join(diagnosetest.Fixtures, "dgx-h100"), nil)
	// The recorded EPYC host: every GPU and HCA right below a root port of
	// its own host bridge, the nearest HCAs at NODE (nvidia-smi recorded
	// the same); no peer-memory module or NVIDIA banner was recorded.
	epyc := evaluateHost(t, filepath.Join(diagnosetest.Fixtures, "epyc-genoa"), nil)
	for _, w := range []struct {
		r             *diagnose.Report
		check, target string
		sev           diagnose.Severity
		contains      []string
	}{
		{good, "gpu.rail", "gpu0", diagnose.Pass, []string{"mlx5_0 at PIX", "0000:17:01.0"}},
		{good, "gpu.rail", "gpu7", diagnose.Pass, []string{"mlx5_9 at PIX"}},
		{good, "gpu.gpudirect", "host", diagnose.Pass, []string{"peermem (nvidia_peermem)", "/sys/module/ib_core/holders/nvidia_peermem"}},
		{bad, "gpu.rail", "gpu2", diagnose.Fail, []string{"mlx5_0,mlx5_1,mlx5_5 at NODE", "NCCL_IB_HCA", "NCCL_TOPO_FILE", "0000:49:00.0"}},
		{bad, "gpu.rail", "gpu3", diagnose.Pass, []string{"mlx5_5 at PIX"}},
		{bad, "gpu.gpudirect", "host", diagnose.Fail, []string{"not registered with ib_core", "proprietary module 515.76", "CONFIG_PCI_P2PDMA=y"}},
		{swapped, "gpu.rail", "gpu1", diagnose.Fail, []string{"mlx5_0,mlx5_1,mlx5_4,mlx5_5 at NODE", "GPU0's switch 0000:16:00.0 holds mlx5_0 and mlx5_1",
			"upstream port 0000:38:00.0", "seated in the wrong slot", "move one of mlx5_0, mlx5_1 below 0000:38:00.0",
			"pin GPU1's ranks to mlx5_1", "NCCL_IB_HCA", "NCCL_TOPO_FILE", "mlx5_1 below pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:03.0"}},
		{swapped, "gpu.rail", "gpu0", diagnose.Pass, []string{"mlx5_0,mlx5_1 at PIX"}},
		{swapped, "gpu.rail", "gpu2", diagnose.Pass, []string{"mlx5_4 at PIX"}},
		{swapped, "gpu.acs", "gpu1", diagnose.Skip, []string{"GPU1 shares no PCIe switch with an HCA"}},
		{bad, "gpu.rail", "gpu2", diagnose.Fail, []string{"check that the HCA of that switch is on the bus"}},
		{none, "gpu.rail", "host", diagnose.Skip, []string{"no GPUs"}},
		{none, "gpu.gpudirect", "host", diagnose.Skip, []string{"no GPUs"}},
		{good, "gpu.acs", "gpu0", diagnose.Pass, []string{"no ACS redirect between GPU0 and mlx5_0",
			"0000:17:01.0/config: ACS at [170] ACSCtl: SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-",
			"0000:19:00.0 IOMMU domain none"}},
		{bad, "gpu.acs", "gpu0", diagnose.Fail, []string{"ACS redirect on 0000:17:01.0, 0000:17:02.0", "ReqRedir+ CmpltRedir+",
			"setpci -s 0000:17:01.0 ECAP_ACS+0x6.w=0000", "pci=disable_acs_redir=0000:17:01.0;0000:17:02.0", "BIOS"}},
		{bad, "gpu.acs", "gpu2", diagnose.Skip, []string{"shares no PCIe switch with an HCA"}},
		{none, "gpu.acs", "host", diagnose.Skip, []string{"no GPUs"}},
		{epyc, "gpu.rail", "gpu0", diagnose.Fail, []string{"mlx5_0,mlx5_1 at NODE", "pci0000:00/0000:00:01.1", "pci0000:20/0000:20:03.1",
			"right below root port 0000:00:01.1", "NCCL_IB_HCA", "NCCL_NET_GDR_LEVEL=NODE"}},
		{epyc, "gpu.rail", "gpu3", diagnose.Fail, []string{"mlx5_2,mlx5_3 at NODE", "pci0000:e0/0000:e0:01.1", "pci0000:80/0000:80:01.1"}},
		{epyc, "gpu.gpudirect", "host", diagnose.Warn, []string{"peermem not ready", "no /proc/driver/nvidia/version", "kernel 6.8.0-64-generic"}},
		{epyc, "gpu.acs", "gpu1", diagnose.Skip, []string{"GPU1 shares no PCIe switch with an HCA"}},
		{epyc, "gpu.acs", "gpu2", diagnose.Skip, []string{"GPU2 shares no PCIe switch with an HCA"}},
	} {
		f, ok := diagnosetest.ReportFinding(w.r, w.check, w.target)
		if !ok {
			t.Errorf("%s %s: no finding", w.check, w.target)
			continue
		}
		if f.Severity != w.sev {
			t.Errorf("%s %s: %s, want %s (%s / %s)", w.check, w.target, f.Severity, w.sev, f.Observed, f.Evidence)
		}
		all := f.Observed + " " + f.Evidence + " " + f.Remedy
		for _, c := range w.contains {
			if !strings.Contains(all, c) {
				t.Errorf("%s %s: %q not in %q", w.check, w.target, c, all)
			}
		}
	}
}

// Without root the config files hold 64 bytes: gpu.acs skips with "needs
// root" instead of passing; a translating IOMMU domain warns with iommu=pt.
func TestGPUACSNeedsRootAndIOMMU(t *testing.T) {
	root := t.TempDir()
	hostfstest.CopyTree(t, filepath.Join(diagnosetest.Fixtures, "hgx-h100"), root)
	devs := filepath.Join(root, "sys/bus/pci/devices")
	for _, a := range []string{"0000:17:01.0", "0000:17:02.0"} {
		b, err := os.ReadFile(filepath.Join(devs, a, "config"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(devs, a, "config"), b[:64], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	grp := filepath.Join(root, "sys/kernel/iommu_groups/40")
	if err := os.MkdirAll(grp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(grp, "type"), []byte("DMA\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gpu1, err := filepath.EvalSymlinks(filepath.Join(devs, "0000:3b:00.0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../../../kernel/iommu_groups/40", filepath.Join(gpu1, "iommu_group")); err != nil {
		t.Fatal(err)
	}
	r := evaluateHost(t, root, nil)
	f, ok := diagnosetest.ReportFinding(r, "gpu.acs", "gpu0")
	if !ok || f.Severity != diagnose.Skip || !strings.Contains(f.Evidence, "needs root") || !strings.Contains(f.Evidence, "0000:17:01.0, 0000:17:02.0") {
		t.Errorf("64-byte config: %+v", f)
	}
	f, ok = diagnosetest.ReportFinding(r, "gpu.acs", "gpu1")
	if !ok || f.Severity != diagnose.Warn || !strings.Contains(f.Observed, "0000:3b:00.0 (DMA)") || !strings.Contains(f.Remedy, "iommu=pt") {
		t.Errorf("DMA domain: %+v", f)
	}
}

// A switch uplink trained at 16 GT/s below a 32 GT/s root port warns on
// the HCA's pci.link finding, naming the hop; the HCA's own link is left
// to pci.link's own rule.
func TestPathLinks(t *testing.T) {
	l := func(s float64, w int, ms float64, mw int) pci.Link {
		return pci.Link{Speed: sysattr.Some(s), Width: sysattr.Some(w), MaxSpeed: sysattr.Some(ms), MaxWidth: sysattr.Some(mw)}
	}
	p := &pci.Path{RootPort: "0000:15:01.0", Hops: []pci.Hop{
		{Upper: "0000:17:02.0", Lower: "0000:1a:00.0", UpperMax: l(32, 16, 32, 16), LowerAt: l(32, 16, 32, 16)},
		{Upper: "0000:15:01.0", Lower: "0000:16:00.0", UpperMax: l(32, 16, 32, 16), LowerAt: l(16, 16, 32, 16)},
	}}
	fd := diagnose.Finding{Severity: diagnose.Pass, Observed: "32 GT/s x16"}
	pathLinks(&fd, p, "mlx5_0")
	if fd.Severity != diagnose.Warn || !strings.Contains(fd.Observed, "0000:16:00.0 below 0000:15:01.0 at 16 GT/s x16 (both ends do 32 GT/s x16)") ||
		!strings.Contains(fd.Remedy, "root port 0000:15:01.0") || !strings.Contains(fd.Evidence, "{0000:1a:00.0,0000:16:00.0}") {
		t.Errorf("%+v", fd)
	}
	p.Hops[1].LowerAt = l(32, 16, 32, 16)
	fd = diagnose.Finding{Severity: diagnose.Pass}
	if pathLinks(&fd, p, "mlx5_0"); fd.Severity != diagnose.Pass {
		t.Errorf("clean path: %+v", fd)
	}
}
