// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package irq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"sync"

	"github.com/rdma-doctor/rdma_doctor/internal/read/cpulist"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pci"
	"github.com/rdma-doctor/rdma_doctor/internal/read/procs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

// Opt is a value that may be missing; a missing value is never zero.
type Opt[T any] = sysattr.Opt[T]

// Snapshot is the IRQ placement of every RDMA device.
type Snapshot struct {
	// Interrupts is /proc/interrupts as placement keeps it: its CPUs, the
	// IRQs keyed to a device (with totals, not per-CPU counts) and the
	// counts of all rows and skipped lines; nil when it could not be
	// read, and then no device has IRQs.
	Interrupts *Interrupts
	Devices    []Device
	// Irqbalance holds the PIDs of running irqbalance processes; OK is
	// false when the process table could not be read. Only processes in
	// this PID namespace are visible: in a container, irqbalance on the
	// host shows only with hostPID.
	Irqbalance Opt[[]int]
	// Errors are the read and parse errors met, each naming its file.
	Errors []error
}

// Device is an RDMA device, its PCI function and the IRQs keyed to it.
type Device struct {
	Name string
	PCI  pci.Function
	// IRQs are the lines of /proc/interrupts that belong to the function:
	// the name or chip column names its address, or msi_irqs/ lists the
	// number. In /proc/interrupts order.
	IRQs []DeviceIRQ
	// Incomplete is set when the device's IRQ list is not the whole truth,
	// and then no count over it is reported: a line of /proc/interrupts
	// that was skipped (torn, unexpected) belongs to this device, by its
	// IRQ number in msi_irqs/ or the address in its text; or Unclassified
	// IRQs of it cannot be told to be completion vectors or not.
	Incomplete bool
	// Unclassified counts the device's IRQs whose names no naming rule of
	// Classify knows (see unclassified); each such device adds an
	// ErrUnclassified to Snapshot.Errors.
	Unclassified int
}

// DeviceIRQ is one IRQ of a device and where it may and does run.
type DeviceIRQ struct {
	*IRQ
	Vector Vector
	// Affinity is smp_affinity_list: the CPUs the IRQ is allowed on.
	// Absent when /proc/irq/N is missing (containers hide it; the IRQ
	// may have gone between the two reads) or unreadable.
	Affinity Opt[cpulist.Set]
	// Effective is effective_affinity_list: the CPUs the kernel actually
	// delivers to (one CPU on x86). Absent on kernels and architectures
	// without it (before 4.15), and when it is empty (IRQ not started).
	Effective Opt[cpulist.Set]
}

// CPUs are the CPUs the IRQ is delivered to: the effective affinity where
// the kernel reports one, else the allowed set.
func (q *DeviceIRQ) CPUs() (cpulist.Set, bool) {
	if q.Effective.OK {
		return q.Effective.V, true
	}
	return q.Affinity.V, q.Affinity.OK
}

// Completion returns the completion (data path) IRQs.
func (d *Device) Completion() []*DeviceIRQ {
	var out []*DeviceIRQ
	for i := range d.IRQs {
		if d.IRQs[i].Vector.Kind == Completion {
			out = append(out, &d.IRQs[i])
		}
	}
	return out
}

// ErrUnclassified means IRQs keyed to a device carry names in no naming form
// Classify knows, so which of them are completion vectors is unknown.
var ErrUnclassified = errors.New("IRQ names in no known naming form")

// Keyed reports whether any IRQ of /proc/interrupts belongs to the device.
// A device with none (a software device, a driver whose names are not
// known and whose function has no msi_irqs/) has no IRQ facts at all,
// which is not the same as zero completion IRQs.
func (d *Device) Keyed() bool { return len(d.IRQs) > 0 }

// CompletionCount is the number of completion IRQs; ok is false when the
// device has no keyed IRQ, lost a line to a torn read or has IRQs whose
// names are in no known form. A device whose IRQs are all known control
// vectors (mlx5 allocates completion vectors on demand) has 0, ok.
func (d *Device) CompletionCount() (n int, ok bool) {
	if !d.Keyed() || d.Incomplete {
		return 0, false
	}
	return len(d.Completion()), true
}

// OffNode counts completion IRQs allowed on at least one CPU outside the
// device's local_cpulist. ok is false when local_cpulist or any completion
// IRQ's affinity is unknown: a partial count would pass for a good one.
func (d *Device) OffNode() (n int, ok bool) {
	if !d.PCI.LocalCPUs.OK || !d.Keyed() || d.Incomplete {
		return 0, false
	}
	for _, q := range d.Completion() {
		off, ok := d.IRQOffNode(q)
		if !ok {
			return 0, false
		}
		if off {
			n++
		}
	}
	return n, true
}

// IRQOffNode reports whether one IRQ of the device is allowed on a CPU
// outside the device's local_cpulist; ok is false when either is unknown.
func (d *Device) IRQOffNode(q *DeviceIRQ) (off, ok bool) {
	if !q.Affinity.OK || !d.PCI.LocalCPUs.OK {
		return false, false
	}
	return !q.Affinity.V.SubsetOf(d.PCI.LocalCPUs.V), true
}

// CPUsUsed is the set of CPUs the completion IRQs are delivered to
// (effective affinity, else allowed). One CPU for all of them is the
// classic pinning mistake. ok is false when any IRQ's CPUs are unknown.
func (d *Device) CPUsUsed() (cpulist.Set, bool) {
	if !d.Keyed() || d.Incomplete {
		return cpulist.Set{}, false
	}
	var used cpulist.Set
	for _, q := range d.Completion() {
		cpus, ok := q.CPUs()
		if !ok {
			return cpulist.Set{}, false
		}
		used.AddSet(cpus)
	}
	return used, true
}

// Read takes the snapshot: the PCI function of every RDMA device that keep
// accepts (nil keeps all), /proc/interrupts, the affinity of every IRQ
// keyed to a device, and the irqbalance process. It returns
// infiniband.ErrNoClass when the host has no RDMA core; any other error is
// in Snapshot.Errors and what could be read is still there.
func Read(ctx context.Context, host hostfs.Host, keep func(string) bool) (*Snapshot, error) {
	devs, err := pci.ReadDevices(ctx, host.Sys, keep)
	if err != nil {
		return nil, err
	}
	return ReadWith(ctx, host, devs)
}

// ReadWith is Read with the devices' PCI functions already read (by
// pci.ReadDevices, shared with the pci collector); it only reads devs.
func ReadWith(ctx context.Context, host hostfs.Host, devs []pci.Device) (*Snapshot, error) {
	s := &Snapshot{Devices: make([]Device, len(devs))}
	for i, d := range devs {
		s.Devices[i] = Device{Name: d.Name, PCI: d.PCI}
		// Only what IRQ placement needs: a garbage numa_node is the
		// pci collector's error, not this one's.
		s.Errors = append(s.Errors, d.PCI.ErrorsFor("device", "local_cpulist", "msi_irqs")...)
	}
	k := newKeying(s.Devices)
	if in, err := ReadInterrupts(ctx, host.Proc, &Scanner{Keep: k.keep, Skip: k.skipped}); err != nil {
		s.Errors = append(s.Errors, err)
	} else {
		s.Interrupts = in
		if n := in.NumSkipped; n > 0 {
			s.Errors = append(s.Errors, fmt.Errorf("parse interrupts: %d unexpected or cut-off line(s) skipped, first at line %d: %.80q", n, in.Skipped[0].Num, in.Skipped[0].Text))
		}
		s.key(k)
		s.Errors = append(s.Errors, s.readAffinities(ctx, host.Proc)...)
	}
	pids, err := procs.Find(ctx, host.Proc, "irqbalance")
	if err != nil {
		s.Errors = append(s.Errors, err)
	} else {
		s.Irqbalance = Opt[[]int]{V: pids["irqbalance"], OK: true}
	}
	return s, ctx.Err()
}

// keying assigns the lines of /proc/interrupts to devices while the file
// streams past: by the address in the action name first, then the chip
// column's, then msi_irqs/. An RDMA bond (mlx5_bond_0) has its PF0's
// IRQs. Only the IRQs of a device are kept, and a skipped line marks the
// device it belongs to.
type keying struct {
	byAddr map[string]int
	byMSI  map[int]int
	// owners holds, for each kept IRQ in order, its device and vector.
	owners []owner
	// incomplete marks the devices that lost a skipped line.
	incomplete map[int]bool
}

type owner struct {
	dev    int
	vector Vector
}

func newKeying(devs []Device) *keying {
	k := &keying{byAddr: map[string]int{}, byMSI: map[int]int{}}
	for i, d := range devs {
		if d.PCI.Address == "" {
			continue
		}
		k.byAddr[d.PCI.Address] = i
		for _, n := range d.PCI.MSIIRQs {
			k.byMSI[n] = i
		}
	}
	return k
}

// keep is Scanner.Keep: it keeps the IRQs that belong to a device.
func (k *keying) keep(q *IRQ) bool {
	if len(k.byAddr) == 0 {
		return false
	}
	v := Classify(q.Name)
	var dev int
	var found bool
	if v.Address != "" {
		dev, found = k.byAddr[v.Address]
	} else if a := ChipAddress(q.Chip); a != "" {
		dev, found = k.byAddr[a]
	} else {
		dev, found = k.byMSI[q.Number]
	}
	if found {
		k.owners = append(k.owners, owner{dev, v})
	}
	return found
}

// skipped is Scanner.Skip: a skipped line that belongs to a device (its
// number in msi_irqs/, or its address in the text) makes the device's IRQ
// list incomplete.
func (k *keying) skipped(_ int, text []byte) {
	mark := func(dev int) {
		if k.incomplete == nil {
			k.incomplete = map[int]bool{}
		}
		k.incomplete[dev] = true
	}
	if dev, ok := k.byMSI[leadingNumber(text)]; ok {
		mark(dev)
	}
	for addr, dev := range k.byAddr {
		if bytes.Contains(text, []byte(addr)) {
			mark(dev)
		}
	}
}

// key hands the kept IRQs to their devices.
func (s *Snapshot) key(k *keying) {
	for i := range s.Interrupts.IRQs {
		o := k.owners[i]
		s.Devices[o.dev].IRQs = append(s.Devices[o.dev].IRQs, DeviceIRQ{IRQ: &s.Interrupts.IRQs[i], Vector: o.vector})
	}
	for i := range s.Devices {
		if err := s.Devices[i].markUnclassified(); err != nil {
			s.Errors = append(s.Errors, err)
		}
	}
	for dev := range k.incomplete {
		s.Devices[dev].Incomplete = true
	}
}

// markUnclassified sets Unclassified and Incomplete when IRQs of the device
// are in no known naming form, and returns the error that says so.
func (d *Device) markUnclassified() error {
	unknown := unclassified(d.IRQs)
	if len(unknown) == 0 {
		return nil
	}
	d.Unclassified, d.Incomplete = len(unknown), true
	return fmt.Errorf("parse interrupts: %s (%s): %d IRQ(s) such as %d %q: %w; the device's IRQ counts are left out",
		d.Name, d.PCI.Address, len(unknown), unknown[0].Number, unknown[0].Name, ErrUnclassified)
}

// unclassified returns the IRQs whose names no naming rule knows although
// they must be RDMA vectors: a name that carries a PCI address was given by
// the driver of that function (mlx5, mlx4, irdma, efa, bnxt_re and mana all
// name theirs so), and when none of a device's IRQs matches any rule
// (keyed by msi_irqs/ or the chip column, names without an address) its
// vectors are named in a form not known here. A count of completion
// vectors over such a list would be a made-up number. Names without an
// address beside known ones are the function's other users (i40e, ice
// netdev queues) and are fine.
func unclassified(qs []DeviceIRQ) []*DeviceIRQ {
	var withAddr, all []*DeviceIRQ
	known := false
	for i := range qs {
		q := &qs[i]
		if q.Vector.Kind != Other {
			known = true
			continue
		}
		all = append(all, q)
		if q.Vector.Address != "" {
			withAddr = append(withAddr, q)
		}
	}
	if !known {
		return all
	}
	return withAddr
}

// leadingNumber is the IRQ number a line starts with ("  225: ..."), or -1.
func leadingNumber(line []byte) int {
	i := skipSpace(line, 0)
	j := i
	for j < len(line) && isDigit(line[j]) {
		j++
	}
	if j == i || j == len(line) || line[j] != ':' || j-i > 9 {
		return -1
	}
	n, _ := strconv.Atoi(string(line[i:j]))
	return n
}

// readAffinities reads /proc/irq/N/{smp_affinity_list,effective_affinity_list}
// of every keyed IRQ, one goroutine per device.
func (s *Snapshot) readAffinities(ctx context.Context, proc hostfs.FS) []error {
	errs := make([][]error, len(s.Devices))
	var wg sync.WaitGroup
	for i := range s.Devices {
		if len(s.Devices[i].IRQs) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := &s.Devices[i]
			for k := range d.IRQs {
				if ctx.Err() != nil {
					return
				}
				q := &d.IRQs[k]
				var e []error
				q.Affinity, q.Effective, e = ReadAffinity(proc, q.Number)
				errs[i] = append(errs[i], e...)
			}
		}()
	}
	wg.Wait()
	var all []error
	for _, e := range errs {
		all = append(all, e...)
	}
	return all
}

// ReadAffinity reads /proc/irq/<n>/smp_affinity_list and
// effective_affinity_list. A missing file is no error: containers hide
// /proc/irq, IRQs come and go, and effective_affinity_list is new (4.15)
// and x86-centric. An empty effective list (an IRQ not started) is absent.
func ReadAffinity(proc hostfs.FS, n int) (affinity, effective Opt[cpulist.Set], errs []error) {
	dir := "irq/" + strconv.Itoa(n) + "/"
	read := func(name string) Opt[cpulist.Set] {
		b, err := proc.ReadFile(dir + name)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			return Opt[cpulist.Set]{}
		}
		set, err := cpulist.Parse(string(b))
		if err != nil {
			errs = append(errs, &infiniband.ParseError{Path: dir + name, Err: err})
			return Opt[cpulist.Set]{}
		}
		return Opt[cpulist.Set]{V: set, OK: true}
	}
	affinity = read("smp_affinity_list")
	if affinity.OK && affinity.V.Empty() {
		affinity = Opt[cpulist.Set]{}
	}
	effective = read("effective_affinity_list")
	if effective.OK && effective.V.Empty() {
		effective = Opt[cpulist.Set]{}
	}
	return affinity, effective, errs
}
