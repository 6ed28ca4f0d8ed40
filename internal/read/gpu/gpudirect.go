// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package gpu

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/names"
	"github.com/rdma-doctor/rdma_doctor/internal/read/tuning"
)

// Paths GPUDirect readiness is read from, below the sysfs, procfs and root
// file systems.
const (
	// MemoryPeersDir holds one directory per peer-memory client registered
	// with MLNX_OFED's ib_core (nv_mem, nv_mem_nc), each with a version.
	MemoryPeersDir = "kernel/mm/memory_peers"
	// NVIDIAVersionFile is the loaded NVIDIA kernel module's banner.
	NVIDIAVersionFile = "driver/nvidia/version"
	osReleaseFile     = "sys/kernel/osrelease"
	procConfigGz      = "config.gz"
)

// PeerMemModules are the kernel modules that give ib_core access to GPU
// memory: nvidia_peermem (shipped with the NVIDIA driver since 470) and
// its predecessor nv_peer_mem (Mellanox's nv_peer_memory). NCCL 2.22 and
// older look for nv_peer_mem's memory_peers entry only (NCCL #1676).
var PeerMemModules = []string{"nvidia_peermem", "nv_peer_mem"}

// peerClients are the memory_peers names NCCL probes.
var peerClients = []string{"nv_mem", "nv_mem_nc"}

// Module is the kind of NVIDIA kernel module loaded.
type Module string

// The NVIDIA kernel module kinds /proc/driver/nvidia/version names.
const (
	ModuleOpen        Module = "open"
	ModuleProprietary Module = "proprietary"
)

// GPUDirect is what GPUDirect RDMA needs, read the way NCCL probes it.
type GPUDirect struct {
	// PeerMemModule is the peer-memory module loaded ("" when none is).
	PeerMemModule string
	// PeerMemHolder is true when that module holds ib_core
	// (/sys/module/ib_core/holders/<module>): it registered with the
	// OFED peer-memory API, which a build without MLNX_OFED does not.
	PeerMemHolder bool
	// MemoryPeers are the memory_peers clients with a version file.
	MemoryPeers []string
	// Module and ModuleVersion are from /proc/driver/nvidia/version;
	// absent when the NVIDIA driver is not loaded.
	Module        Opt[Module]
	ModuleVersion string
	// KernelRelease is uname -r; ConfigSource the file the kernel
	// configuration came from ("" when none could be read).
	KernelRelease Opt[string]
	ConfigSource  string
	// P2PDMA and MoveNotify are CONFIG_PCI_P2PDMA and
	// CONFIG_DMABUF_MOVE_NOTIFY ("y", "m", or "n" for "is not set");
	// absent when no configuration was read.
	P2PDMA, MoveNotify Opt[string]
	Errors             []error
}

// PeerMemReady reports whether the peer-memory path is ready: a
// peer-memory module is loaded and registered with ib_core (it holds
// ib_core, or its memory_peers entry exists). A module loaded but not
// registered (NCCL #1939) is not ready.
func (g *GPUDirect) PeerMemReady() bool {
	return len(g.MemoryPeers) > 0 || g.PeerMemModule != "" && g.PeerMemHolder
}

// DMABufReady reports whether the DMA-BUF path is ready: the NVIDIA open
// kernel module, a kernel of 5.12 or later (ib_umem_dmabuf) built with
// CONFIG_PCI_P2PDMA. ok is false when that cannot be told: the driver's
// kind or the kernel configuration is unknown and nothing else rules the
// path out.
func (g *GPUDirect) DMABufReady() (ready, ok bool) {
	if g.Module.OK && g.Module.V != ModuleOpen {
		return false, true
	}
	if g.KernelRelease.OK {
		if maj, min, ok := kernelVersion(g.KernelRelease.V); ok && (maj < 5 || maj == 5 && min < 12) {
			return false, true
		}
	}
	if g.P2PDMA.OK && g.P2PDMA.V != "y" {
		return false, true
	}
	if !g.Module.OK || !g.P2PDMA.OK {
		return false, false
	}
	return true, true
}

// ReadGPUDirect reads the GPUDirect RDMA prerequisites of a host.
func ReadGPUDirect(h hostfs.Host) *GPUDirect {
	g := &GPUDirect{}
	for _, m := range PeerMemModules {
		if _, err := h.Sys.ReadDir("module/" + m); err == nil {
			g.PeerMemModule = m
			_, err := h.Sys.ReadLink("module/ib_core/holders/" + m)
			switch {
			case err == nil:
				g.PeerMemHolder = true
			case !errors.Is(err, fs.ErrNotExist):
				g.Errors = append(g.Errors, err)
			}
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			g.Errors = append(g.Errors, err)
		}
	}
	for _, c := range peerClients {
		if _, err := h.Sys.ReadFile(MemoryPeersDir + "/" + c + "/version"); err == nil {
			g.MemoryPeers = append(g.MemoryPeers, c)
		} else if !errors.Is(err, fs.ErrNotExist) {
			g.Errors = append(g.Errors, err)
		}
	}
	if b, err := h.Proc.ReadFile(NVIDIAVersionFile); err == nil {
		m, v, err := ParseNVIDIAVersion(string(b))
		if err != nil {
			g.Errors = append(g.Errors, fmt.Errorf("parse %s: %w", NVIDIAVersionFile, err))
		} else {
			g.Module, g.ModuleVersion = Opt[Module]{V: m, OK: true}, names.Label(v) // a label value
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		g.Errors = append(g.Errors, err)
	}
	if b, err := h.Proc.ReadFile(osReleaseFile); err == nil {
		if r, err := tuning.ParseWord(string(b)); err == nil {
			g.KernelRelease = Opt[string]{V: r, OK: true}
		} else {
			g.Errors = append(g.Errors, fmt.Errorf("parse %s: %w", osReleaseFile, err))
		}
	} else {
		g.Errors = append(g.Errors, err)
	}
	g.readConfig(h)
	return g
}

// readConfig reads the kernel configuration: /boot/config-<release>
// below the root, else /proc/config.gz (CONFIG_IKCONFIG_PROC). Neither
// is an error: many hosts ship neither, and the values stay absent.
func (g *GPUDirect) readConfig(h hostfs.Host) {
	var text []byte
	if g.KernelRelease.OK {
		name := "boot/config-" + g.KernelRelease.V
		b, err := h.Root.ReadFile(name)
		switch {
		case err == nil:
			text, g.ConfigSource = b, "/"+name
		case !errors.Is(err, fs.ErrNotExist):
			g.Errors = append(g.Errors, err)
		}
	}
	if text == nil {
		b, err := h.Proc.ReadFile(procConfigGz)
		switch {
		case err == nil:
			t, err := gunzip(b)
			if err != nil {
				g.Errors = append(g.Errors, fmt.Errorf("/proc/%s: %w", procConfigGz, err))
				return
			}
			text, g.ConfigSource = t, "/proc/"+procConfigGz
		case !errors.Is(err, fs.ErrNotExist):
			g.Errors = append(g.Errors, err)
			return
		default:
			return
		}
	}
	cfg := ParseKernelConfig(text, "CONFIG_PCI_P2PDMA", "CONFIG_DMABUF_MOVE_NOTIFY")
	g.P2PDMA = Opt[string]{V: cfg["CONFIG_PCI_P2PDMA"], OK: true}
	g.MoveNotify = Opt[string]{V: cfg["CONFIG_DMABUF_MOVE_NOTIFY"], OK: true}
}

// gunzip decompresses /proc/config.gz, bounded as every read is.
func gunzip(b []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(io.LimitReader(r, hostfs.MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(out) > hostfs.MaxFileSize {
		return nil, hostfs.ErrTooLarge
	}
	return out, nil
}

// ParseKernelConfig returns the values of the named options in a kernel
// .config: "y", "m", a string or number as written, and "n" for an option
// that is "# CONFIG_X is not set" or not in the file at all (an option
// the file does not name is off: make oldconfig writes every visible one).
func ParseKernelConfig(text []byte, names ...string) map[string]string {
	out := make(map[string]string, len(names))
	for _, n := range names {
		out[n] = "n"
	}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, "="); ok {
			if _, want := out[k]; want {
				out[k] = strings.Trim(v, `"`)
			}
		}
	}
	return out
}

// ParseNVIDIAVersion parses /proc/driver/nvidia/version's first line:
// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  <date>"
// (proprietary) or "NVRM version: NVIDIA UNIX Open Kernel Module for
// x86_64  550.54.15  Release Build  (...)  <date>" (open).
func ParseNVIDIAVersion(s string) (Module, string, error) {
	line, _, _ := strings.Cut(s, "\n")
	rest, ok := strings.CutPrefix(line, "NVRM version: ")
	if !ok {
		return "", "", fmt.Errorf("%q: want \"NVRM version: ...\"", line)
	}
	kind := ModuleProprietary
	if strings.Contains(rest, "Open Kernel Module") {
		kind = ModuleOpen
	}
	words := strings.Fields(rest)
	for i, w := range words {
		if w != "Module" {
			continue
		}
		j := i + 1
		if j+1 < len(words) && words[j] == "for" {
			j += 2 // "for x86_64"
		}
		if j < len(words) && words[j] != "" && words[j][0] >= '0' && words[j][0] <= '9' {
			return kind, words[j], nil
		}
	}
	return "", "", fmt.Errorf("%q: no driver version after \"Kernel Module\"", line)
}

// kernelVersion reads major and minor from a release ("5.15.0-105-generic").
func kernelVersion(r string) (int, int, bool) {
	maj, rest, ok := strings.Cut(r, ".")
	if !ok {
		return 0, 0, false
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(rest[:end])
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return a, b, true
}
