// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package pci reads the PCI function an RDMA device sits on: its NUMA node,
// the CPUs local to it, its PCIe link against what the link could do, and
// the MSI/MSI-X IRQs allocated to it. It also reads the host's NUMA
// topology. The same snapshot serves the collectors and the placement
// checks.
package pci

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/rdma-doctor/rdma_doctor/internal/read/cpulist"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

// Opt is a value that may be missing; a missing value is never zero.
type Opt[T any] = sysattr.Opt[T]

func some[T any](v T) Opt[T] { return sysattr.Some(v) }

// Function is one PCI function (/sys/bus/pci/devices/<BDF>, reached from an
// RDMA device through its device link).
type Function struct {
	// Address is the function's BDF ("0000:5e:00.0"; Hyper-V uses domains
	// like "8b76:00:02.0").
	Address string
	// NUMANode is the node the platform assigns, -1 when it assigns none
	// (single-socket, most VMs): kept as -1, never guessed.
	NUMANode Opt[int]
	// LocalCPUs is local_cpulist: the CPUs of the device's node (all CPUs
	// when NUMANode is -1).
	LocalCPUs Opt[cpulist.Set]
	// LinkSpeed and MaxLinkSpeed are in GT/s per lane; absent when the file
	// is missing (not PCIe) or the kernel prints "Unknown".
	LinkSpeed, MaxLinkSpeed Opt[float64]
	// LinkWidth and MaxLinkWidth are lanes.
	LinkWidth, MaxLinkWidth Opt[int]
	// MSIIRQs are the IRQ numbers of msi_irqs/, the kernel's own record of
	// which IRQs the function owns; nil when the directory is missing.
	MSIIRQs []int
	// AER is the function's own AER statistics.
	AER AER
	// Path is the way from the function up to its root port: its links
	// and the root port's AER statistics. Set by the readers that know
	// the function's place in the tree (its chain).
	Path Path
	// Payload is the function's PCIe transaction sizes from its config
	// space (root only). Read for RDMA devices only (ReadDevices): one
	// more file per device, and the one reader that judges them.
	Payload Payload
	// Errors are the read and parse errors met, each naming its file.
	Errors []error
}

// LinkDegraded reports whether the PCIe link trained below what the
// function supports (slower or narrower). ok is false when any of the four
// values is unknown. A card in a slot narrower or slower than itself is
// degraded too: the bandwidth is what the slot allows.
func (f *Function) LinkDegraded() (degraded, ok bool) {
	if !f.LinkSpeed.OK || !f.MaxLinkSpeed.OK || !f.LinkWidth.OK || !f.MaxLinkWidth.OK {
		return false, false
	}
	return f.LinkSpeed.V < f.MaxLinkSpeed.V || f.LinkWidth.V < f.MaxLinkWidth.V, true
}

// ErrorsFor returns the errors met on the named files of the function
// ("local_cpulist", "msi_irqs"; "device" for the link itself), so a reader
// that needs only some of them reports only its own.
func (f *Function) ErrorsFor(files ...string) []error {
	var out []error
	for _, err := range f.Errors {
		if slices.Contains(files, path.Base(sysattr.ErrorPath(err))) {
			out = append(out, err)
		}
	}
	return out
}

// ParseError is a file that was read but is not in the kernel's format.
type ParseError = sysattr.ParseError

// ReadFunction reads the PCI function in dir, a path below the sysfs root
// ("class/infiniband/mlx5_0/device" or "bus/pci/devices/0000:5e:00.0").
// Address is left for the caller, who knows it from the link.
// Files a PCI function need not have (a non-PCIe function has no link
// files, old kernels no msi_irqs) are not errors when missing.
func ReadFunction(sys hostfs.FS, dir string) Function {
	r := reader{sysattr.Dir{FS: sys, Path: dir}}
	f := Function{}
	f.NUMANode = sysattr.Get(&r.Dir, "numa_node", true, ParseNUMANode)
	f.LocalCPUs = sysattr.Get(&r.Dir, "local_cpulist", true, cpulist.Parse)
	f.LinkSpeed = known(sysattr.Get(&r.Dir, "current_link_speed", false, ParseLinkSpeed))
	f.MaxLinkSpeed = known(sysattr.Get(&r.Dir, "max_link_speed", false, ParseLinkSpeed))
	f.LinkWidth = sysattr.Get(&r.Dir, "current_link_width", false, ParseLinkWidth)
	f.MaxLinkWidth = sysattr.Get(&r.Dir, "max_link_width", false, ParseLinkWidth)
	f.MSIIRQs = r.msiIRQs()
	f.AER = ReadAER(&r.Dir)
	f.Errors = r.Errs
	return f
}

// LinkSpeed is a parsed link speed file. The kernel prints "Unknown" for
// a state it cannot name: a value (Known false), not an error.
type LinkSpeed struct {
	GTs   float64
	Known bool
}

func known(o Opt[LinkSpeed]) Opt[float64] {
	if !o.OK || !o.V.Known {
		return Opt[float64]{}
	}
	return some(o.V.GTs)
}

// reader reads one PCI function; it is used by a single goroutine.
type reader struct{ sysattr.Dir }

// msiIRQs lists msi_irqs/. Entries are files (directories before Linux
// 3.19) named by IRQ number; anything else in there is skipped.
func (r *reader) msiIRQs() []int {
	entries, err := r.FS.ReadDir(r.Path + "/msi_irqs")
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.Errs = append(r.Errs, err)
		}
		return nil
	}
	irqs := make([]int, 0, len(entries))
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && n >= 0 {
			irqs = append(irqs, n)
		}
	}
	return irqs
}

// ParseNUMANode parses numa_node ("%d"): a node number, or -1 for none.
func ParseNUMANode(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < -1 || n > 1<<16 {
		return 0, fmt.Errorf("numa_node %q: want a node number or -1", s)
	}
	return n, nil
}

// ParseLinkSpeed parses current_link_speed and max_link_speed in every form
// the kernel has printed: "16.0 GT/s PCIe" (4.20 and later), "8 GT/s" and
// "2.5 GT/s" (older), and "Unknown" / "Unknown speed" for a state it cannot
// name (reported as not known, no error).
func ParseLinkSpeed(s string) (LinkSpeed, error) {
	s = strings.TrimSpace(s)
	if s == "Unknown" || s == "Unknown speed" {
		return LinkSpeed{}, nil
	}
	num, ok := strings.CutSuffix(strings.TrimSuffix(s, " PCIe"), " GT/s")
	if !ok {
		return LinkSpeed{}, fmt.Errorf("link speed %q: want \"<n> GT/s [PCIe]\"", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" || num[0] < '0' || num[0] > '9' || !(v > 0 && v < 1e4) {
		return LinkSpeed{}, fmt.Errorf("link speed %q: bad number", s)
	}
	return LinkSpeed{GTs: v, Known: true}, nil
}

// ParseLinkWidth parses current_link_width and max_link_width ("%u"): a
// lane count, 0 for a link that is down.
func ParseLinkWidth(s string) (int, error) {
	s = strings.TrimSpace(s)
	n, err := strconv.Atoi(s)
	if err != nil || s[0] < '0' || s[0] > '9' || n > 64 {
		return 0, fmt.Errorf("link width %q: want a lane count", s)
	}
	return n, nil
}

// Device is an RDMA device and the PCI function it sits on.
type Device struct {
	Name string
	// PCI is the device's function; PCI.Address is empty for software
	// devices (rxe, siw), which have no PCI parent, and nothing else is
	// read for them.
	PCI Function
}

// ReadDevices reads the PCI function of every RDMA device in
// /sys/class/infiniband that keep accepts (nil keeps all), concurrently.
// It returns infiniband.ErrNoClass when the host has no RDMA core.
func ReadDevices(ctx context.Context, sys hostfs.FS, keep func(string) bool) ([]Device, error) {
	names, err := infiniband.DeviceNames(sys, keep)
	if err != nil {
		return nil, err
	}
	devs := make([]Device, len(names))
	for i, n := range names {
		devs[i].Name = n
	}
	var wg sync.WaitGroup
	for i := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			devs[i].PCI = readDevice(sys, devs[i].Name)
			if devs[i].PCI.Address != "" {
				devs[i].PCI.Path = readDevicePath(sys, devs[i].Name)
			}
		}()
	}
	wg.Wait()
	return devs, ctx.Err()
}

func readDevice(sys hostfs.FS, name string) Function {
	dir := infiniband.ClassDir + "/" + name + "/device"
	link, err := sys.ReadLink(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// A software device has no parent. A dangling class link
			// (the device vanished) shows up here too; the infiniband
			// collector reports that one.
			return Function{}
		}
		return Function{Errors: []error{err}}
	}
	addr := path.Base(link)
	if !IsAddress(addr) {
		// The parent is not a PCI function (a virtual or auxiliary device).
		return Function{}
	}
	f := ReadFunction(sys, dir)
	f.Address = addr
	if f.Payload, err = ReadPayload(sys, dir); err != nil {
		f.Errors = append(f.Errors, err)
	}
	return f
}

// readDevicePath reads the path of an RDMA device's function from its
// class link, which holds the whole chain ("../../devices/pci0000:15/
// 0000:15:01.0/.../0000:1a:00.0/infiniband/mlx5_0"; the device link
// is relative to the function and does not).
func readDevicePath(sys hostfs.FS, name string) Path {
	link, err := sys.ReadLink(infiniband.ClassDir + "/" + name)
	if err != nil {
		return Path{Errors: []error{err}}
	}
	chain, fn, ok := ParseChain(link)
	if !ok {
		return Path{}
	}
	return ReadPath(sys, chain, fn)
}

// IsAddress reports whether s is a PCI function address as the kernel
// prints it: domain (4 or more hex digits), bus, device, function
// ("0000:5e:00.0", "8b76:00:02.0").
func IsAddress(s string) bool {
	dom, rest, ok := strings.Cut(s, ":")
	if !ok || len(dom) < 4 || len(dom) > 8 || !hex(dom) || len(rest) != 7 {
		return false
	}
	return hex(rest[0:2]) && rest[2] == ':' && hex(rest[3:5]) && rest[5] == '.' && rest[6] >= '0' && rest[6] <= '7'
}

func hex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return s != ""
}
