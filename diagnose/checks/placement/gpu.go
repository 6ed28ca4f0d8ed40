// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/gpu"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pcicfg"
)

// GPUChecks registers the checks of gpu.go; checks.All lists every concern's.
func GPUChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{
		ID:    "gpu.rail",
		Title: "Every GPU has an HCA on its PCIe switch",
		Reads: []diagnose.Source{diagnose.SourceGPU},
		Doc: "Each GPU's nearest RDMA device, by the nvidia-smi topo -m relation computed from the sysfs PCI paths, is on its own " +
			"PCIe switch (PIX) or switch tree (PXB): fail when the nearest is only across the host bridge or the CPU (PHB, NODE, SYS), " +
			"where NCCL's GPUDirect traffic crosses the root complex; warn when one HCA is the only near one of two GPUs, or when " +
			"the GPUs do not all see their nearest HCA at the same distance. Skips on hosts without GPUs.",
		Remedy: "Seat the HCA in the slot of the GPU's switch (lspci -tv shows the tree) and check that it is on the bus; until then " +
			"name the HCA each rank uses with NCCL_IB_HCA or describe the tree in an NCCL topology file (NCCL_TOPO_FILE).",
		Run: checkGPURail,
	})
	l.Register(&diagnose.Check{
		ID:    "gpu.gpudirect",
		Title: "GPUDirect RDMA ready",
		Reads: []diagnose.Source{diagnose.SourceGPU},
		Doc: "On a host with GPUs and RDMA devices one GPUDirect RDMA path is ready, probed as NCCL does: peer memory " +
			"(nvidia_peermem, or the legacy nv_peer_mem, loaded and registered with ib_core: an ib_core holder or a " +
			"/sys/kernel/mm/memory_peers entry) or DMA-BUF (the NVIDIA open kernel module on a 5.12+ kernel built with " +
			"CONFIG_PCI_P2PDMA). Without either NCCL logs \"GPU Direct RDMA Disabled\" and stages through host memory, about 10x " +
			"slower (NCCL #1676, #1939, #1537). Warns when the DMA-BUF path cannot be told (no kernel configuration); skips " +
			"on hosts without GPUs.",
		Remedy: "modprobe nvidia_peermem (persist it in /etc/modules-load.d/); if it loads but does not register, reinstall the " +
			"NVIDIA driver after MLNX_OFED/DOCA so that DKMS builds it against the peer-memory API; or use DMA-BUF: the open " +
			"kernel module on a kernel with CONFIG_PCI_P2PDMA=y.",
		Run: checkGPUDirect,
	})
}

// gpuTargets is why the GPU checks have nothing to judge, or "".
func gpuTargets(s *gpu.Snapshot) string {
	switch {
	case len(s.GPUs) == 0:
		return "no GPUs on the PCI bus (NVIDIA 3D/VGA or AMD accelerator classes)"
	case len(s.Devices) == 0:
		return "no RDMA device sits on a PCI function: nothing for the GPUs to reach"
	}
	return ""
}

func gpuTarget(g *gpu.GPU) string { return "gpu" + g.Name() }

func checkGPURail(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	if why := gpuTargets(s.GPU()); why != "" {
		return kit.NoTargets(why), nil
	}
	type near struct {
		link gpu.Link
		devs []string
		ok   bool
	}
	nears := make([]near, len(s.GPU().GPUs))
	// The distance most GPUs see their nearest HCA at, and which GPUs
	// have each device as their only near one.
	count := map[gpu.Link]int{}
	only := map[string][]int{}
	for i := range s.GPU().GPUs {
		l, devs, ok := s.GPU().Closest(i)
		nears[i] = near{l, devs, ok}
		if !ok {
			continue
		}
		count[l]++
		if l <= gpu.PXB && len(devs) == 1 {
			only[devs[0]] = append(only[devs[0]], i)
		}
	}
	mode := gpu.Link(0)
	for l, n := range count {
		if mode == 0 || n > count[mode] || n == count[mode] && l < mode {
			mode = l
		}
	}
	var out []diagnose.Finding
	for i := range s.GPU().GPUs {
		g := &s.GPU().GPUs[i]
		n := nears[i]
		if !n.ok {
			out = append(out, diagnose.Finding{Severity: diagnose.Skip, Target: gpuTarget(g),
				Evidence: fmt.Sprintf("the relation of GPU%d (%s) to no RDMA device could be classified (a NUMA node unknown): %s",
					g.Index, g.Address, diagnose.ErrorsText(s.GPU().Errors))})
			continue
		}
		fd := diagnose.Finding{Target: gpuTarget(g),
			Observed: fmt.Sprintf("nearest HCA %s at %s", strings.Join(n.devs, ","), n.link),
			Expected: "an HCA on the GPU's PCIe switch (PIX or PXB), the same distance as the other GPUs",
			Evidence: fmt.Sprintf("GPU%d %s below %s; %s below %s (the sysfs paths of /sys/bus/pci/devices and /sys/class/infiniband)",
				g.Index, g.Address, chainText(g.Chain), n.devs[0], devChain(s.GPU(), n.devs[0])),
			Severity: diagnose.Pass}
		sharers := only[n.devs[0]]
		switch {
		case n.link > gpu.PXB && len(g.Chain.Bridges) <= 1:
			// Right below a root port (EPYC and workstation boards): no
			// switch an HCA could share, so no missing card to look for.
			fd.Severity = diagnose.Fail
			fd.Remedy = fmt.Sprintf("GPU%d hangs right below root port %s, with no PCIe switch an HCA could share: GPUDirect RDMA "+
				"to %s crosses the CPU (%s), which NCCL by default does not use (it stages through host memory). If the chassis has "+
				"slots behind a shared PCIe switch, put the GPU and an HCA there; else pin GPU%d's ranks to %s with NCCL_IB_HCA and "+
				"either keep the host-memory path or allow GPUDirect at that distance (NCCL_NET_GDR_LEVEL=%s), measuring both",
				g.Index, switchOf(g.Chain), n.devs[0], n.link, g.Index, n.devs[0], n.link)
		case n.link > gpu.PXB:
			fd.Severity = diagnose.Fail
			if j, ok := crowded(nears[i].devs, i, func(j int) (gpu.Link, []string, bool) {
				return nears[j].link, nears[j].devs, nears[j].ok
			}, len(nears)); ok {
				// An HCA missing here and one too many on a neighbour's
				// switch is one card in the wrong slot (two cards swapped
				// between switches), not a card off the bus.
				o := &s.GPU().GPUs[j]
				extra := nears[j].devs[len(nears[j].devs)-1]
				fd.Observed += fmt.Sprintf("; GPU%d's switch %s holds %s", o.Index, switchOf(o.Chain), strings.Join(nears[j].devs, " and "))
				for _, d := range nears[j].devs {
					if d != n.devs[0] {
						fd.Evidence += fmt.Sprintf("; %s below %s", d, devChain(s.GPU(), d))
					}
				}
				fd.Remedy = fmt.Sprintf("GPU%d's PCIe switch (upstream port %s) has no HCA while GPU%d's (%s) has %d (%s): an HCA is "+
					"seated in the wrong slot, as when two cards are swapped between switches. Compare the slots with lspci -tv and move "+
					"one of %s below %s; until then pin GPU%d's ranks to %s and GPU%d's to the other with NCCL_IB_HCA, or describe the "+
					"tree in an NCCL topology file (NCCL_TOPO_FILE)",
					g.Index, switchOf(g.Chain), o.Index, switchOf(o.Chain), len(nears[j].devs), strings.Join(nears[j].devs, ", "),
					strings.Join(nears[j].devs, ", "), switchOf(g.Chain), g.Index, extra, o.Index)
				break
			}
			fd.Remedy = fmt.Sprintf("no HCA shares GPU%d's PCIe switch (upstream port %s): check that the HCA of that switch is on "+
				"the bus (lspci -tv shows what hangs below %s) and seated in its slot; until then pin GPU%d's ranks to %s with "+
				"NCCL_IB_HCA, or describe the tree in an NCCL topology file (NCCL_TOPO_FILE)",
				g.Index, switchOf(g.Chain), switchOf(g.Chain), g.Index, n.devs[0])
		case len(sharers) > 1:
			fd.Severity = diagnose.Warn
			fd.Observed += fmt.Sprintf(", the only near HCA of GPU%s", joinInts(sharers, ", GPU"))
			fd.Remedy = fmt.Sprintf("%s is the only near HCA of several GPUs: their traffic shares one port. Unless the host is "+
				"built that way, move an HCA to the switch of the other GPU, or set NCCL_IB_HCA per rank", n.devs[0])
		case n.link != mode:
			fd.Severity = diagnose.Warn
			fd.Observed += fmt.Sprintf(" (most GPUs see theirs at %s)", mode)
			fd.Remedy = fmt.Sprintf("GPU%d sees its nearest HCA farther than the other GPUs do: check the slot of %s against "+
				"lspci -tv; NCCL's rings then differ per rail (NCCL_TOPO_FILE can describe the intended tree)", g.Index, n.devs[0])
		}
		out = append(out, fd)
	}
	return out, nil
}

// crowded finds, for GPU i without a near HCA, another GPU with several
// near (PIX or PXB) HCAs that are all among i's nearest ones (nearest is
// that GPU's ordered list): the first such GPU by index.
func crowded(nearest []string, i int, near func(int) (gpu.Link, []string, bool), n int) (int, bool) {
	for j := 0; j < n; j++ {
		l, devs, ok := near(j)
		if j == i || !ok || l > gpu.PXB || len(devs) < 2 {
			continue
		}
		all := true
		for _, d := range devs {
			all = all && slices.Contains(nearest, d)
		}
		if all {
			return j, true
		}
	}
	return 0, false
}

func chainText(c gpu.Chain) string {
	return strings.Join(append([]string{c.Root}, c.Bridges...), "/")
}

func devChain(s *gpu.Snapshot, name string) string {
	for _, d := range s.Devices {
		if d.Name == name {
			return chainText(d.Chain)
		}
	}
	return "?"
}

// switchOf names the switch a function hangs below: its upstream port
// (the second bridge below the root port), else the nearest bridge.
func switchOf(c gpu.Chain) string {
	switch {
	case len(c.Bridges) >= 2:
		return c.Bridges[len(c.Bridges)-2]
	case len(c.Bridges) == 1:
		return c.Bridges[0]
	}
	return c.Root
}

func joinInts(v []int, sep string) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, sep)
}

func checkGPUDirect(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	if why := gpuTargets(s.GPU()); why != "" {
		return kit.NoTargets(why), nil
	}
	d := s.GPU().GPUDirect
	if d == nil {
		return kit.NoTargets("no NVIDIA GPU: the peermem and NVIDIA-module prerequisites do not apply (AMD GPUs are not judged yet)"), nil
	}
	peer := d.PeerMemReady()
	dma, dmaKnown := d.DMABufReady()
	fd := diagnose.Finding{Target: "host", Evidence: gpuDirectEvidence(d),
		Expected: "peermem (nvidia_peermem registered with ib_core) or dmabuf (open kernel module, CONFIG_PCI_P2PDMA=y) ready"}
	var paths []string
	if peer {
		paths = append(paths, "peermem ("+d.PeerMemModule+")")
	}
	if dma {
		paths = append(paths, "dmabuf")
	}
	switch {
	case len(paths) > 0:
		fd.Severity, fd.Observed = diagnose.Pass, "ready: "+strings.Join(paths, ", ")
	case !dmaKnown:
		fd.Severity, fd.Unknown = diagnose.Warn, true
		fd.Observed = "peermem not ready; dmabuf cannot be told (" + dmaUnknownWhy(d) + ")"
		fd.Remedy = peerRemedy(d) + "; to judge DMA-BUF, install the kernel's /boot/config-<release> (or enable CONFIG_IKCONFIG_PROC)"
	default:
		fd.Severity, fd.Observed = diagnose.Fail, "no GPUDirect RDMA path ready: NCCL stages GPU traffic through host memory"
		fd.Remedy = peerRemedy(d) + "; or use DMA-BUF: the NVIDIA open kernel module on a 5.12+ kernel with CONFIG_PCI_P2PDMA=y"
	}
	return []diagnose.Finding{fd}, nil
}

func peerRemedy(d *gpu.GPUDirect) string {
	if d.PeerMemModule != "" {
		return d.PeerMemModule + " is loaded but not registered with ib_core (no ib_core holder, no /sys/kernel/mm/memory_peers entry): " +
			"it was built without the MLNX_OFED/DOCA peer-memory API; reinstall the NVIDIA driver after MLNX_OFED/DOCA so that DKMS " +
			"rebuilds it, then rmmod " + d.PeerMemModule + " && modprobe " + d.PeerMemModule
	}
	return "modprobe nvidia_peermem and persist it (echo nvidia-peermem > /etc/modules-load.d/nvidia-peermem.conf)"
}

func dmaUnknownWhy(d *gpu.GPUDirect) string {
	if !d.Module.OK {
		return "the NVIDIA driver is not loaded: no /proc/driver/nvidia/version"
	}
	return "no /boot/config-<release> or /proc/config.gz"
}

func gpuDirectEvidence(d *gpu.GPUDirect) string {
	var e []string
	switch {
	case d.PeerMemModule == "":
		e = append(e, "no "+strings.Join(gpu.PeerMemModules, " or ")+" in /sys/module")
	case d.PeerMemHolder:
		e = append(e, "/sys/module/ib_core/holders/"+d.PeerMemModule)
	default:
		e = append(e, "/sys/module/"+d.PeerMemModule+" loaded, not in /sys/module/ib_core/holders")
	}
	if len(d.MemoryPeers) > 0 {
		e = append(e, "/sys/kernel/mm/memory_peers/{"+strings.Join(d.MemoryPeers, ",")+"}/version")
	} else {
		e = append(e, "no /sys/kernel/mm/memory_peers entry")
	}
	if d.Module.OK {
		e = append(e, fmt.Sprintf("/proc/driver/nvidia/version: %s module %s", d.Module.V, d.ModuleVersion))
	}
	if d.KernelRelease.OK {
		e = append(e, "kernel "+d.KernelRelease.V)
	}
	if d.P2PDMA.OK {
		e = append(e, fmt.Sprintf("%s: CONFIG_PCI_P2PDMA=%s CONFIG_DMABUF_MOVE_NOTIFY=%s", d.ConfigSource, d.P2PDMA.V, d.MoveNotify.V))
	}
	return strings.Join(slices.Clip(e), "; ")
}

// GPUACSChecks registers the checks of gpu.go; checks.All lists every concern's.
func GPUACSChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{
		ID:    "gpu.acs",
		Title: "No ACS redirect between a GPU and its HCA",
		Reads: []diagnose.Source{diagnose.SourceGPU},
		Doc: "The PCIe bridges between each GPU and its nearest HCA (the switch ports below the bridge they share, when the " +
			"relation is PIX or PXB) do not redirect peer-to-peer traffic: ACS control (extended capability 0x000d, +6) has " +
			"ReqRedir, CmpltRedir and EgressCtrl off. With them on, GPUDirect RDMA goes up through the root complex and the " +
			"IOMMU, slower at best and hanging at worst (NCCL #304, #2079; NCCL's troubleshooting guide). Fails on a " +
			"redirecting bridge; warns when the GPU or the HCA has a translating IOMMU domain (DMA, DMA-FQ) where iommu=pt " +
			"would pass it through. The config space past its first 64 bytes needs root (CAP_SYS_ADMIN): without it the " +
			"check skips with \"needs root\", never guesses. Skips on hosts without GPUs and for GPUs without a near HCA.",
		Remedy: "Disable ACS in the BIOS (the PCIe switch or root port ACS setting); at runtime, as root, clear the control " +
			"register of each redirecting bridge: setpci -s <bdf> ECAP_ACS+0x6.w=0000 (lost at reboot); or boot with " +
			"pci=disable_acs_redir=<bdf>;<bdf> (Linux 4.19+; pci=noacs on kernels that carry that patch). For the IOMMU, " +
			"boot with iommu=pt (and intel_iommu=on or amd_iommu=on).",
		Run: checkGPUACS,
	})
}

func checkGPUACS(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	if why := gpuTargets(s.GPU()); why != "" {
		return kit.NoTargets(why), nil
	}
	p := s.GPU().P2P
	var out []diagnose.Finding
	for i := range s.GPU().GPUs {
		g := &s.GPU().GPUs[i]
		var pairs []gpu.Pair
		for _, pr := range p.Pairs {
			if pr.GPU == g.Index {
				pairs = append(pairs, pr)
			}
		}
		if len(pairs) == 0 {
			out = append(out, diagnose.Finding{Severity: diagnose.Skip, Target: gpuTarget(g),
				Evidence: fmt.Sprintf("GPU%d shares no PCIe switch with an HCA (see gpu.rail): its traffic crosses the root complex whatever ACS says", g.Index)})
			continue
		}
		out = append(out, acsFinding(s.GPU(), g, pairs))
	}
	return out, nil
}

// acsFinding judges the bridges between one GPU and its nearest HCAs.
func acsFinding(s *gpu.Snapshot, g *gpu.GPU, pairs []gpu.Pair) diagnose.Finding {
	p := s.P2P
	fd := diagnose.Finding{Target: gpuTarget(g), Severity: diagnose.Pass,
		Expected: "ACSCtl ReqRedir- CmpltRedir- EgressCtrl- on the bridges between the GPU and its HCA; IOMMU identity or off"}
	var devs, evidence, redirect, needRoot, unreadable []string
	for _, pr := range pairs {
		devs = append(devs, pr.Device)
		for _, addr := range pr.Bridges {
			b, _ := p.Bridge(addr)
			name := "/sys/bus/pci/devices/" + addr + "/config"
			a, present, known := b.Config.ACS()
			switch {
			case b.Config.NeedsRoot():
				needRoot = append(needRoot, addr)
			case !known:
				why := "the extended config space is not readable"
				if b.Config.Err != nil {
					why = b.Config.Err.Error()
				}
				unreadable = append(unreadable, addr+": "+why)
			case !present:
				evidence = append(evidence, name+": no ACS capability")
			default:
				evidence = append(evidence, fmt.Sprintf("%s: ACS at [%x] ACSCtl: %s", name, a.Offset, pcicfg.Decode(a.Ctl)))
				if a.Redirects() {
					redirect = append(redirect, addr)
				}
			}
		}
	}
	slices.Sort(redirect)
	redirect = slices.Compact(redirect)
	var translated []string
	for _, a := range append([]string{g.Address}, deviceAddrs(s, pairs)...) {
		if f := p.Functions[a]; f != nil && f.IOMMU.OK {
			evidence = append(evidence, fmt.Sprintf("%s IOMMU domain %s", a, f.IOMMU.V))
			if gpu.Translated(f.IOMMU.V) {
				translated = append(translated, a+" ("+f.IOMMU.V+")")
			}
		}
	}
	if c := p.Cmdline; c.OK {
		evidence = append(evidence, cmdlineText(c.V))
	}
	fd.Evidence = strings.Join(evidence, "; ")
	switch {
	case len(redirect) > 0:
		fd.Severity = diagnose.Fail
		fd.Observed = fmt.Sprintf("ACS redirect on %s between GPU%d and %s: peer-to-peer traffic goes through the root complex",
			strings.Join(redirect, ", "), g.Index, strings.Join(devs, ","))
		cmds := make([]string, len(redirect))
		for i, a := range redirect {
			cmds[i] = "setpci -s " + a + " ECAP_ACS+0x6.w=0000"
		}
		fd.Remedy = "disable ACS for the PCIe switch in the BIOS; until then, as root: " + strings.Join(cmds, "; ") +
			" (lost at reboot), or boot with pci=disable_acs_redir=" + strings.Join(redirect, ";") +
			" (pci=noacs on kernels that carry it); NCCL's troubleshooting guide, PCI Access Control Services"
	case len(needRoot) > 0:
		fd.Severity = diagnose.Skip
		fd.Evidence = fmt.Sprintf("needs root: the config space of %s read only its first 64 bytes, which sysfs gives a reader without "+
			"CAP_SYS_ADMIN; ACS is past them. Run rdma_doctor as root or grant CAP_SYS_ADMIN", strings.Join(needRoot, ", "))
	case len(unreadable) > 0:
		fd.Severity = diagnose.Skip
		fd.Evidence = "cannot read the ACS state of " + strings.Join(unreadable, "; ")
	case len(translated) > 0:
		fd.Severity = diagnose.Warn
		fd.Observed = "no ACS redirect; IOMMU translates DMA of " + strings.Join(translated, ", ")
		fd.Remedy = "boot with iommu=pt (with intel_iommu=on or amd_iommu=on) so that GPUDirect DMA is not translated by the IOMMU"
	default:
		fd.Observed = fmt.Sprintf("no ACS redirect between GPU%d and %s", g.Index, strings.Join(devs, ","))
	}
	return fd
}

// deviceAddrs are the PCI addresses of the pairs' HCAs, in pair order.
func deviceAddrs(s *gpu.Snapshot, pairs []gpu.Pair) []string {
	var out []string
	for _, pr := range pairs {
		for _, d := range s.Devices {
			if d.Name == pr.Device {
				out = append(out, d.Address)
			}
		}
	}
	return out
}

func cmdlineText(c gpu.Cmdline) string {
	var parts []string
	for _, kv := range [][2]string{{"iommu", c.IOMMU}, {"intel_iommu", c.IntelIOMMU}, {"amd_iommu", c.AMDIOMMU}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	if o := c.ACSOverride(); len(o) > 0 {
		parts = append(parts, "pci="+strings.Join(o, ","))
	}
	if len(parts) == 0 {
		return "/proc/cmdline: no iommu, intel_iommu, amd_iommu or pci ACS option"
	}
	return "/proc/cmdline: " + strings.Join(parts, " ")
}
