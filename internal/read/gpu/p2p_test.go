// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package gpu

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pcicfg"
)

// pairs renders the judged pairs as "gpuN/dev: bridge,bridge".
func pairs(p *P2P) string {
	var out []string
	for _, pr := range p.Pairs {
		out = append(out, "gpu"+itoa(pr.GPU)+"/"+pr.Device+": "+strings.Join(pr.Bridges, ","))
	}
	return strings.Join(out, "\n")
}

func itoa(n int) string { return string(rune('0' + n)) }

// On the recorded H100 host each GPU and its HCA hang below two downstream
// ports of one PEX890xx: those ports are between them, with ACS present
// and every control off, as lspci -vvv recorded them.
func TestP2PHGXH100(t *testing.T) {
	s := readFixture(t, "hgx-h100", 2)
	p := s.P2P
	if len(p.Pairs) != 8 || len(p.Bridges) != 16 {
		t.Fatalf("pairs:\n%s\nbridges %d", pairs(p), len(p.Bridges))
	}
	if got := strings.SplitN(pairs(p), "\n", 2)[0]; got != "gpu0/mlx5_0: 0000:17:01.0,0000:17:02.0" {
		t.Errorf("first pair %q", got)
	}
	for _, b := range p.Bridges {
		a, present, known := b.Config.ACS()
		if !known || !present || a.Ctl != 0 || a.Offset != 0x170 || pcicfg.Decode(a.Cap) != "SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans+" {
			t.Errorf("%s: %+v %v %v", b.Address, a, present, known)
		}
	}
	if len(p.Functions) != 16 {
		t.Errorf("functions: %d", len(p.Functions))
	}
	for a, f := range p.Functions {
		if f.Config.Parsed == nil || !f.IOMMU.OK || f.IOMMU.V != IOMMUNone {
			t.Errorf("%s: %+v", a, f)
		}
		if _, present, known := f.Config.ATS(); present || !known {
			t.Errorf("%s: ATS present %v known %v (the recording shows none)", a, present, known)
		}
	}
	if p.Cmdline.OK || len(s.Errors) != 0 {
		t.Errorf("cmdline %+v, errors %v", p.Cmdline, s.Errors)
	}
	// The GPU's own path: its link to 17:01.0 and the root port's link
	// to the switch, both at 32 GT/s x16; the root port's AER counts 0.
	g := &s.GPUs[0]
	if len(g.Function.Path.Hops) != 2 || g.Function.Path.RootPort != "0000:15:01.0" || g.Function.Path.Hops[0].Upper != "0000:17:01.0" || g.Function.Path.Hops[1].Lower != "0000:16:00.0" {
		t.Fatalf("path %+v", g.Function.Path)
	}
	if hops, ok := g.Function.Path.Degraded(); len(hops) != 0 || !ok {
		t.Errorf("degraded %+v %v", hops, ok)
	}
	if a := g.Function.Path.RootPortAER; !a.RootPortFatal.OK || a.RootPortFatal.V != 0 || !a.Correctable.OK {
		t.Errorf("root port AER %+v", a)
	}
	if a := g.Function.AER; !a.Fatal.OK || a.RootPortFatal.OK {
		t.Errorf("GPU AER %+v", a)
	}
}

// hgx-h100-nogdr has NCCL #304's ACSCtl on the switch ports above the GPUs
// and HCAs; GPU2 has no HCA below its switch and no pair.
func TestP2PNoGDR(t *testing.T) {
	s := readFixture(t, "hgx-h100-nogdr", 2)
	p := s.P2P
	if len(p.Pairs) != 7 || len(p.Bridges) != 14 {
		t.Fatalf("pairs:\n%s", pairs(p))
	}
	for _, pr := range p.Pairs {
		if pr.GPU == 2 {
			t.Errorf("GPU2 judged: %+v", pr)
		}
	}
	for _, b := range p.Bridges {
		a, present, known := b.Config.ACS()
		if !known || !present || a.Ctl != 0x001d || !a.Redirects() {
			t.Errorf("%s: %+v", b.Address, a)
		}
	}
}

// What an unprivileged reader gets: 64 bytes. The ACS state is then
// unknown, never "absent"; a file cut below 64 bytes is an error.
func TestP2PNeedsRoot(t *testing.T) {
	root := t.TempDir()
	hostfstest.CopyTree(t, "../../../fixtures/hosts/hgx-h100", root)
	cut := func(addr string, n int) {
		t.Helper()
		p := filepath.Join(root, "sys/bus/pci/devices", addr, "config")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b[:n], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cut("0000:17:01.0", 64)
	cut("0000:17:02.0", 10)
	if err := os.Remove(filepath.Join(root, "sys/bus/pci/devices/0000:39:01.0/config")); err != nil {
		t.Fatal(err)
	}
	// An IOMMU group in DMA (translated) mode for GPU0.
	if err := os.MkdirAll(filepath.Join(root, "sys/kernel/iommu_groups/11"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		os.WriteFile(filepath.Join(root, "sys/kernel/iommu_groups/11/type"), []byte("DMA-FQ\n"), 0o644),
		os.Symlink("../../../../../../kernel/iommu_groups/11", filepath.Join(root, "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0/iommu_group")),
		os.WriteFile(filepath.Join(root, "proc/cmdline"), []byte("BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu=pt pci=realloc,noacs quiet\n"), 0o644),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	p, err := hostfs.Paths{Rootfs: root}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Read(context.Background(), p.Open(), Options{Nodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.P2P.Bridge("0000:17:01.0")
	if _, _, known := b.Config.ACS(); known || !b.Config.NeedsRoot() || b.Config.Err != nil {
		t.Errorf("64 bytes: %+v", b.Config)
	}
	b, _ = s.P2P.Bridge("0000:17:02.0")
	if _, _, known := b.Config.ACS(); known || b.Config.NeedsRoot() || !errors.Is(b.Config.Err, pcicfg.ErrTruncated) {
		t.Errorf("10 bytes: %+v", b.Config)
	}
	b, _ = s.P2P.Bridge("0000:39:01.0")
	if _, _, known := b.Config.ACS(); known || b.Config.Err == nil {
		t.Errorf("no config: %+v", b.Config)
	}
	if f := s.P2P.Functions["0000:19:00.0"]; !f.IOMMU.OK || f.IOMMU.V != IOMMUDMAFQ || !Translated(f.IOMMU.V) {
		t.Errorf("GPU0 IOMMU %+v", f.IOMMU)
	}
	c := s.P2P.Cmdline
	if !c.OK || c.V.IOMMU != "pt" || c.V.IntelIOMMU != "on" || !c.V.Passthrough() || strings.Join(c.V.ACSOverride(), ",") != "noacs" {
		t.Errorf("cmdline %+v", c)
	}
	if len(s.Errors) != 2 {
		t.Errorf("errors (want the 10-byte file and the missing one): %v", s.Errors)
	}
}

func TestParseCmdline(t *testing.T) {
	c := ParseCmdline(`BOOT_IMAGE=/boot/vmlinuz-6.8.0 root=UUID=x ro amd_iommu=off pci=disable_acs_redir=0000:17:01.0;0000:17:02.0 dyndbg="file x +p" iommu=nopt`)
	if c.AMDIOMMU != "off" || c.IOMMU != "nopt" || !c.Passthrough() || strings.Join(c.ACSOverride(), ",") != "disable_acs_redir=0000:17:01.0;0000:17:02.0" {
		t.Errorf("%+v", c)
	}
	if c := ParseCmdline("ro quiet\n"); c.Passthrough() || c.ACSOverride() != nil {
		t.Errorf("%+v", c)
	}
	for typ, want := range map[string]bool{IOMMUNone: false, IOMMUIdentity: false, IOMMUDMA: true, IOMMUDMAFQ: true, "unmanaged": true} {
		if Translated(typ) != want {
			t.Errorf("Translated(%q) != %v", typ, want)
		}
	}
}
