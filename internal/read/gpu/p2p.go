// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package gpu

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pci"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pcicfg"
)

// CmdlineFile is the kernel command line below the procfs root.
const CmdlineFile = "cmdline"

// P2P is what decides whether GPUDirect traffic between a GPU and its
// nearest HCA stays below their PCIe switch: ACS on the bridges between
// them, read from the config space (root only past its first 64 bytes),
// the IOMMU mode of both ends and the kernel command line.
type P2P struct {
	// Bridges are the bridges on the paths between each GPU and its
	// nearest HCAs, in address order; a bridge two pairs cross is here
	// once.
	Bridges []Bridge
	// Pairs are the GPU-HCA pairs judged (relation PIX or PXB), with the
	// bridges between them.
	Pairs []Pair
	// Functions are the config space and IOMMU state of the GPUs and
	// HCAs of those pairs, by address.
	Functions map[string]*Function
	// Cmdline is /proc/cmdline's IOMMU and ACS options; absent when
	// unreadable.
	Cmdline Opt[Cmdline]
}

// Pair is a GPU and one of its nearest HCAs below a common bridge.
type Pair struct {
	GPU     int
	Device  string
	Bridges []string
}

// Bridge is one bridge on a GPU-HCA path and what its config space says.
type Bridge struct {
	Address string
	Config  Config
}

// Config is a function's parsed config space, or why there is none.
type Config struct {
	// Parsed is nil when the file could not be read or is shorter than
	// its header; Err then says why.
	Parsed *pcicfg.Config
	Err    error
}

// ACS returns the ACS capability. known is false when the bytes read do
// not reach the extended capabilities (an unprivileged read, or a 256-byte
// space without MMCONFIG) or the file was not read: then present says
// nothing.
func (c *Config) ACS() (acs pcicfg.ACS, present, known bool) {
	if c.Parsed == nil || c.Parsed.Space != pcicfg.SpaceExtended {
		return pcicfg.ACS{}, false, false
	}
	a, ok := c.Parsed.ACS()
	return a, ok, true
}

// ATS is ACS's counterpart for Address Translation Services.
func (c *Config) ATS() (ats pcicfg.ATS, present, known bool) {
	if c.Parsed == nil || c.Parsed.Space != pcicfg.SpaceExtended {
		return pcicfg.ATS{}, false, false
	}
	a, ok := c.Parsed.ATS()
	return a, ok, true
}

// NeedsRoot reports whether the file held only the 64-byte header an
// unprivileged reader gets.
func (c *Config) NeedsRoot() bool {
	return c.Parsed != nil && c.Parsed.Space == pcicfg.SpaceHeader
}

// IOMMU domain types of /sys/kernel/iommu_groups/<n>/type (Linux 5.11+).
const (
	// IOMMUNone is a function without an iommu_group link: no IOMMU
	// translates its DMA (none present, or it is off).
	IOMMUNone     = "none"
	IOMMUIdentity = "identity"
	IOMMUDMA      = "DMA"
	IOMMUDMAFQ    = "DMA-FQ"
)

// Translated reports whether an IOMMU domain type translates DMA: every
// type but none and identity (DMA, DMA-FQ, unmanaged, blocked).
func Translated(t string) bool { return t != IOMMUNone && t != IOMMUIdentity }

// Function is a GPU's or HCA's config space and IOMMU domain.
type Function struct {
	Config Config
	// IOMMU is the domain type (IOMMUNone without a group); absent when
	// the group has no readable type (kernels before 5.11).
	IOMMU Opt[string]
}

// Cmdline holds the kernel options that set the IOMMU mode and ACS.
type Cmdline struct {
	// IOMMU, IntelIOMMU and AMDIOMMU are the values of iommu=,
	// intel_iommu= and amd_iommu= ("" when not given).
	IOMMU, IntelIOMMU, AMDIOMMU string
	// PCI are the comma-separated pci= options.
	PCI []string
}

// Passthrough reports whether the command line asks for an identity
// (untranslated) default domain: iommu=pt, or the IOMMU off.
func (c Cmdline) Passthrough() bool {
	return c.IOMMU == "pt" || c.IOMMU == "off" || hasOpt(c.IntelIOMMU, "off") || c.AMDIOMMU == "off"
}

// ACSOverride names the pci= options that clear ACS redirection:
// noacs (a distribution patch) and disable_acs_redir= (Linux 4.19+).
func (c Cmdline) ACSOverride() []string {
	var out []string
	for _, o := range c.PCI {
		if o == "noacs" || strings.HasPrefix(o, "disable_acs_redir=") {
			out = append(out, o)
		}
	}
	return out
}

func hasOpt(list, opt string) bool { return slices.Contains(strings.Split(list, ","), opt) }

// ParseCmdline reads the options of /proc/cmdline that matter here.
// Quoted values are not split (the kernel's own rule): a pci= option is
// never quoted in practice, and a quoted value stays one word.
func ParseCmdline(s string) Cmdline {
	var c Cmdline
	for _, w := range cmdlineWords(s) {
		k, v, _ := strings.Cut(w, "=")
		switch k {
		case "iommu":
			c.IOMMU = v
		case "intel_iommu":
			c.IntelIOMMU = v
		case "amd_iommu":
			c.AMDIOMMU = v
		case "pci":
			c.PCI = append(c.PCI, strings.Split(v, ",")...)
		}
	}
	return c
}

func cmdlineWords(s string) []string {
	var out []string
	var b strings.Builder
	quoted := false
	for _, r := range strings.TrimSpace(s) {
		switch {
		case r == '"':
			quoted = !quoted
		case !quoted && (r == ' ' || r == '\t' || r == '\n'):
			if b.Len() > 0 {
				out = append(out, b.String())
				b.Reset()
			}
		default:
			b.WriteRune(r)
		}
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// between returns the bridges between two functions below one host
// bridge: those below the deepest bridge they share, on both sides (the
// ports whose ACS redirect would send their traffic upstream); nil when
// they share no bridge (the root complex is between them anyway).
func between(a, b Chain) []string {
	if a.Root != b.Root {
		return nil
	}
	k := 0
	for k < len(a.Bridges) && k < len(b.Bridges) && a.Bridges[k] == b.Bridges[k] {
		k++
	}
	if k == 0 {
		return nil
	}
	out := slices.Clone(a.Bridges[k:])
	return append(out, b.Bridges[k:]...)
}

// readP2P reads the bridges between every GPU and its nearest HCAs.
func (s *Snapshot) readP2P(h hostfs.Host) *P2P {
	p := &P2P{Functions: map[string]*Function{}}
	bridges := map[string]bool{}
	chains := map[string]Endpoint{}
	for _, d := range s.Devices {
		chains[d.Name] = d
	}
	for i := range s.GPUs {
		g := &s.GPUs[i]
		l, devs, ok := s.Closest(i)
		if !ok || l > PXB {
			continue
		}
		for _, name := range devs {
			d := chains[name]
			br := between(g.Chain, d.Chain)
			if br == nil {
				continue
			}
			p.Pairs = append(p.Pairs, Pair{GPU: g.Index, Device: name, Bridges: br})
			for _, b := range br {
				bridges[b] = true
			}
			for _, a := range []string{g.Address, d.Address} {
				if p.Functions[a] == nil {
					p.Functions[a] = readFunction(h.Sys, a, &s.Errors)
				}
			}
		}
	}
	addrs := make([]string, 0, len(bridges))
	for b := range bridges {
		addrs = append(addrs, b)
	}
	sort.Strings(addrs)
	for _, a := range addrs {
		c := readConfig(h.Sys, a)
		if c.Err != nil {
			s.Errors = append(s.Errors, c.Err)
		}
		p.Bridges = append(p.Bridges, Bridge{Address: a, Config: c})
	}
	if len(p.Pairs) > 0 {
		// Every kernel has /proc/cmdline; a tree without one (a copy of
		// /sys alone) has no options to show, which is no read error.
		b, err := h.Proc.ReadFile(CmdlineFile)
		switch {
		case err == nil:
			p.Cmdline = Opt[Cmdline]{V: ParseCmdline(string(b)), OK: true}
		case !errors.Is(err, fs.ErrNotExist):
			s.Errors = append(s.Errors, err)
		}
	}
	return p
}

// Bridge returns the named bridge.
func (p *P2P) Bridge(addr string) (*Bridge, bool) {
	for i := range p.Bridges {
		if p.Bridges[i].Address == addr {
			return &p.Bridges[i], true
		}
	}
	return nil, false
}

// readConfig reads and parses a function's config file. A malformed
// capability list is an error but keeps what was found before it.
func readConfig(sys hostfs.FS, addr string) Config {
	name := pci.BusDir + "/" + addr + "/" + pci.ConfigFile
	b, err := sys.ReadFile(name)
	if err != nil {
		return Config{Err: err}
	}
	c, err := pcicfg.Parse(b)
	if err != nil {
		err = fmt.Errorf("parse %s: %w", name, err)
	}
	return Config{Parsed: c, Err: err}
}

// readFunction reads a GPU's or HCA's config space and IOMMU domain.
func readFunction(sys hostfs.FS, addr string, errs *[]error) *Function {
	f := &Function{Config: readConfig(sys, addr)}
	if f.Config.Err != nil {
		*errs = append(*errs, f.Config.Err)
	}
	link, err := sys.ReadLink(pci.BusDir + "/" + addr + "/iommu_group")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f.IOMMU = Opt[string]{V: IOMMUNone, OK: true}
		return f
	case err != nil:
		*errs = append(*errs, err)
		return f
	}
	name := "kernel/iommu_groups/" + path.Base(link) + "/type"
	b, err := sys.ReadFile(name)
	switch {
	case err == nil:
		if t := strings.TrimSpace(string(b)); t != "" && !strings.ContainsAny(t, " \t") && len(t) <= 32 {
			f.IOMMU = Opt[string]{V: t, OK: true}
		} else {
			*errs = append(*errs, fmt.Errorf("parse %s: %q is not a domain type", name, t))
		}
	case !errors.Is(err, fs.ErrNotExist):
		*errs = append(*errs, err)
	}
	return f
}
