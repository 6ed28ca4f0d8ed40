// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package pci

import (
	"bufio"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

// Chain is a PCI function's place in the tree: the host bridge directory
// its sysfs path starts with ("pci0000:15") and the bridges between that
// host bridge and the function, root port first ("0000:15:01.0",
// "0000:16:00.0", "0000:17:01.0"). The function itself is not in Bridges.
type Chain struct {
	Root    string
	Bridges []string
}

// ParseChain reads a chain from a sysfs link target or path
// ("../../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0",
// or the same with "/infiniband/mlx5_0" after the function). The function
// is the last PCI address of the first run of addresses; the component
// before that run is the host bridge. ok is false when the path holds no
// PCI address (a software device: devices/virtual/...).
func ParseChain(p string) (c Chain, fn string, ok bool) {
	parts := strings.Split(p, "/")
	start := -1
	for i, s := range parts {
		if IsAddress(s) {
			start = i
			break
		}
	}
	if start < 1 {
		return Chain{}, "", false
	}
	end := start
	for end < len(parts) && IsAddress(parts[end]) {
		end++
	}
	c.Root = parts[start-1]
	c.Bridges = slices.Clone(parts[start : end-1])
	return c, parts[end-1], true
}

// AER is a function's Advanced Error Reporting statistics (Linux 4.19+):
// the TOTAL_ERR_* line of aer_dev_correctable, aer_dev_nonfatal and
// aer_dev_fatal, and on a root port the aer_rootport_total_err_* counts of
// the error messages it received from below. A value is absent when its
// file is (no AER capability, AER owned by the firmware, an older kernel).
type AER struct {
	Correctable, NonFatal, Fatal Opt[uint64]
	// RootPort* are a root port's received ERR_COR, ERR_NONFATAL and
	// ERR_FATAL messages, whoever below sent them.
	RootPortCorrectable, RootPortNonFatal, RootPortFatal Opt[uint64]
}

// The AER files and their totals' names.
const (
	aerCorrectable = "aer_dev_correctable"
	aerNonFatal    = "aer_dev_nonfatal"
	aerFatal       = "aer_dev_fatal"
)

// ReadAER reads the AER statistics of the function in dir. Missing files
// are not errors: not every function has AER.
func ReadAER(d *sysattr.Dir) AER {
	return AER{
		Correctable:         sysattr.Get(d, aerCorrectable, false, aerTotal("TOTAL_ERR_COR")),
		NonFatal:            sysattr.Get(d, aerNonFatal, false, aerTotal("TOTAL_ERR_NONFATAL")),
		Fatal:               sysattr.Get(d, aerFatal, false, aerTotal("TOTAL_ERR_FATAL")),
		RootPortCorrectable: sysattr.Get(d, "aer_rootport_total_err_cor", false, ParseCount),
		RootPortNonFatal:    sysattr.Get(d, "aer_rootport_total_err_nonfatal", false, ParseCount),
		RootPortFatal:       sysattr.Get(d, "aer_rootport_total_err_fatal", false, ParseCount),
	}
}

func aerTotal(name string) func(string) (uint64, error) {
	return func(s string) (uint64, error) { return ParseAERStats(s, name) }
}

// ParseAERStats parses an aer_dev_* file ("RxErr 0\nBadTLP 0\n...
// TOTAL_ERR_COR 0\n": one "<name> <count>" line per error bit, the
// kernel's names or "<kind>_bit[<n>]", then the total) and returns the
// total line's count. Every line must be a name and a count.
func ParseAERStats(s, total string) (uint64, error) {
	sc := bufio.NewScanner(strings.NewReader(s))
	found := false
	var v uint64
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		name, num, ok := strings.Cut(line, " ")
		n, err := strconv.ParseUint(num, 10, 64)
		if !ok || name == "" || err != nil {
			return 0, fmt.Errorf("line %q: want \"<name> <count>\"", line)
		}
		if name == total {
			v, found = n, true
		}
	}
	if !found {
		return 0, fmt.Errorf("no %s line", total)
	}
	return v, nil
}

// ParseCount parses a sysfs counter ("%llu\n").
func ParseCount(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	v, err := strconv.ParseUint(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a count", t)
	}
	return v, nil
}

// Link is the PCIe link state one function reports.
type Link struct {
	Speed, MaxSpeed Opt[float64]
	Width, MaxWidth Opt[int]
}

func readLink(d *sysattr.Dir) Link {
	return Link{
		Speed:    known(sysattr.Get(d, "current_link_speed", false, ParseLinkSpeed)),
		MaxSpeed: known(sysattr.Get(d, "max_link_speed", false, ParseLinkSpeed)),
		Width:    sysattr.Get(d, "current_link_width", false, ParseLinkWidth),
		MaxWidth: sysattr.Get(d, "max_link_width", false, ParseLinkWidth),
	}
}

// Hop is one physical PCIe link between a function and the root port:
// Upper is the port above it (the root port or a switch's downstream
// port), Lower the function below (a switch's upstream port, or the
// function itself). The link's state is what Lower reports; what it could
// train to is the lesser of both ends' maximum.
type Hop struct {
	Upper, Lower      string
	UpperMax, LowerAt Link
}

// Degraded reports whether the link trained below what both ends support:
// slower than min(upper max speed, lower max speed) or narrower than
// min(upper max width, lower max width). A Gen4 card below a Gen5 port
// at 16 GT/s is not degraded; a Gen5 card at 16 GT/s below a Gen5 port
// is. ok is false when a value is unknown.
func (h *Hop) Degraded() (degraded, ok bool) {
	u, l := h.UpperMax, h.LowerAt
	if !u.MaxSpeed.OK || !u.MaxWidth.OK || !l.Speed.OK || !l.MaxSpeed.OK || !l.Width.OK || !l.MaxWidth.OK {
		return false, false
	}
	return l.Speed.V < min(u.MaxSpeed.V, l.MaxSpeed.V) || l.Width.V < min(u.MaxWidth.V, l.MaxWidth.V), true
}

// Path is a function's way up to its root port.
type Path struct {
	// RootPort is the first bridge below the host bridge; "" for a
	// function on the host bridge itself (a root complex integrated one),
	// which has no path.
	RootPort string
	// RootPortAER is the root port's AER statistics.
	RootPortAER AER
	// Hops are the physical links, the function's own first, up to the
	// root port's.
	Hops   []Hop
	Errors []error
}

// Degraded reports the hops that trained below what both ends support;
// ok is false when some hop could not be judged and none is degraded.
func (p *Path) Degraded() (hops []Hop, ok bool) {
	ok = true
	for _, h := range p.Hops {
		d, k := h.Degraded()
		if !k {
			ok = false
		}
		if d {
			hops = append(hops, h)
		}
	}
	return hops, ok || len(hops) > 0
}

// ReadPath reads the links between the function fn and its root port
// along chain. Which links are physical follows from the layout of PCI
// Express below a root port: the root port and each switch's downstream
// port link to a switch's upstream port or an endpoint; an upstream port
// and its downstream ports are one switch, joined inside it. So from the
// root port down, every other bridge starts a physical link, and the
// function's own link to its parent always is one. A bridge's link files
// describe its downstream link when it is a root or downstream port, its
// upstream link when it is an upstream port.
func ReadPath(sys hostfs.FS, chain Chain, fn string) Path {
	var p Path
	if len(chain.Bridges) == 0 {
		return p
	}
	p.RootPort = chain.Bridges[0]
	nodes := append(slices.Clone(chain.Bridges), fn)
	links := make([]Link, len(nodes))
	dirs := make([]sysattr.Dir, len(nodes))
	for i, a := range nodes {
		dirs[i] = sysattr.Dir{FS: sys, Path: BusDir + "/" + a}
		links[i] = readLink(&dirs[i])
	}
	p.RootPortAER = ReadAER(&dirs[0])
	last := len(nodes) - 1
	for i := last; i >= 1; i-- {
		if i%2 == 1 || i == last {
			p.Hops = append(p.Hops, Hop{Upper: nodes[i-1], Lower: nodes[i], UpperMax: links[i-1], LowerAt: links[i]})
		}
	}
	for i := range dirs {
		p.Errors = append(p.Errors, dirs[i].Errs...)
	}
	return p
}
