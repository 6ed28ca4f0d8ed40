// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package irq

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

func fixtureHost(t testing.TB, name string) hostfs.Host { return hostfstest.Fixture(t, name) }

// devWant is what a device's IRQ facts must be; -1 means absent.
type devWant struct {
	completion, control, other int
	irqs, offNode, cpus        int // CompletionCount, OffNode, CPUsUsed().Len()
	cpuList                    string
}

func facts(d *Device) devWant {
	var w devWant
	for _, q := range d.IRQs {
		switch q.Vector.Kind {
		case Completion:
			w.completion++
		case Control:
			w.control++
		default:
			w.other++
		}
	}
	w.irqs, w.offNode, w.cpus = -1, -1, -1
	if n, ok := d.CompletionCount(); ok {
		w.irqs = n
	}
	if n, ok := d.OffNode(); ok {
		w.offNode = n
	}
	if s, ok := d.CPUsUsed(); ok {
		w.cpus, w.cpuList = s.Len(), s.String()
	}
	return w
}

// TestReadFixtures: every fixture host's devices, keyed by each route (the
// name's address, msi_irqs/ for names without one), with the facts the
// placement checks use.
func TestReadFixtures(t *testing.T) {
	local16 := devWant{completion: 16, control: 1, irqs: 16, offNode: 0, cpus: 16, cpuList: "0-15"}
	node1 := devWant{completion: 16, control: 1, irqs: 16, offNode: 0, cpus: 16, cpuList: "56-71"}
	for _, tc := range []struct {
		host       string
		devices    map[string]devWant
		irqbalance []int
		errs       []string // substrings, one per expected error
	}{
		{
			host: "dgx-h100",
			devices: map[string]devWant{
				"mlx5_0": local16, "mlx5_1": local16, "mlx5_4": local16, "mlx5_5": local16,
				"mlx5_6": node1, "mlx5_7": node1, "mlx5_8": node1, "mlx5_9": node1,
				"mlx5_bond_0": node1, // PF0's vectors; PF1's are nobody's
			},
			irqbalance: nil,
		},
		{
			host: "numa-remote",
			devices: map[string]devWant{
				"mlx5_0": {completion: 16, control: 1, irqs: 16, offNode: 16, cpus: 16, cpuList: "0-15"},
				"mlx5_1": {completion: 16, control: 1, irqs: 16, offNode: 16, cpus: 1, cpuList: "0"},
			},
			irqbalance: []int{2317},
		},
		{
			host: "cx6-hdr-fdr", // 5.15: IR-PCI-MSI chip, keyed by name
			devices: map[string]devWant{
				"mlx5_0": local16, "mlx5_1": local16,
			},
		},
		{
			host: "roce-cx6dx", // comps named from 1
			devices: map[string]devWant{
				"mlx5_0": local16,
				"mlx5_1": {completion: 16, control: 1, irqs: 16, offNode: 0, cpus: 16, cpuList: "32-47"},
			},
		},
		{
			host: "mlx4-qdr", // 3.10: no effective_affinity_list, irqbalance
			devices: map[string]devWant{
				"mlx4_0": {completion: 8, control: 1, irqs: 8, offNode: 0, cpus: 8, cpuList: "8-11,24-27"},
			},
			irqbalance: []int{812},
		},
		{
			host: "iwarp-i40iw", // no address in any name: msi_irqs/; numa_node -1
			devices: map[string]devWant{
				"i40iw0": {completion: 4, control: 1, other: 5, irqs: 4, offNode: 0, cpus: 4, cpuList: "4-7"},
			},
		},
		{
			host: "opa-hfi1", // "hfi1_0 sdma3": names with spaces, msi_irqs/
			devices: map[string]devWant{
				"hfi1_0": {completion: 24, control: 1, irqs: 24, offNode: 0, cpus: 24, cpuList: "0-13,28-37"},
			},
		},
		{
			host: "broken",
			devices: map[string]devWant{
				"mlx5_0": local16,
				// the torn comp4 line: its two halves are skipped and the
				// device's counts are withheld
				"mlx5_1": {completion: 15, control: 1, irqs: -1, offNode: -1, cpus: -1},
				// numa_node garbage does not matter to IRQs; one
				// smp_affinity_list is garbage, so no off-node count (the
				// effective list still gives the CPUs)
				"mlx5_2": {completion: 16, control: 1, irqs: 16, offNode: -1, cpus: 16, cpuList: "0-15"},
				// /proc/irq/26x-27x missing: no affinity, no error
				"mlx5_3": {completion: 16, control: 1, irqs: 16, offNode: -1, cpus: -1},
				"mlx5_4": {irqs: -1, offNode: -1, cpus: -1}, // dangling class link
			},
			errs: []string{
				"2 unexpected or cut-off line(s) skipped, first at line 29",
				"irq/247/smp_affinity_list",
			},
		},
	} {
		t.Run(tc.host, func(t *testing.T) {
			s, err := Read(context.Background(), fixtureHost(t, tc.host), nil)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]devWant{}
			for i := range s.Devices {
				got[s.Devices[i].Name] = facts(&s.Devices[i])
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.devices) {
				t.Errorf("devices:\n got %v\nwant %v", got, tc.devices)
			}
			if !s.Irqbalance.OK || !slices.Equal(s.Irqbalance.V, tc.irqbalance) {
				t.Errorf("irqbalance %+v, want %v", s.Irqbalance, tc.irqbalance)
			}
			if len(s.Errors) != len(tc.errs) {
				t.Errorf("%d errors, want %d: %v", len(s.Errors), len(tc.errs), s.Errors)
			}
			for _, want := range tc.errs {
				if !strings.Contains(fmt.Sprint(s.Errors), want) {
					t.Errorf("no error mentions %q: %v", want, s.Errors)
				}
			}
		})
	}
}

// TestReadEffectiveAffinity: the CPUs used come from the effective list
// where there is one, and the off-node count from the allowed list. On
// dgx-h100 the async vectors may run anywhere ("0-223") but are not
// completion vectors, so they count for neither.
func TestReadEffectiveAffinity(t *testing.T) {
	s, err := Read(context.Background(), fixtureHost(t, "dgx-h100"), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := s.Devices[slices.IndexFunc(s.Devices, func(d Device) bool { return d.Name == "mlx5_0" })]
	for _, q := range d.IRQs {
		if q.Vector.Kind != Control {
			continue
		}
		if q.Number != 200 || q.Affinity.V.String() != "0-223" || q.Effective.V.String() != "200" {
			t.Errorf("async IRQ %d: allowed %v effective %v", q.Number, q.Affinity.V, q.Effective.V)
		}
		if cpus, _ := q.CPUs(); cpus.String() != "200" {
			t.Errorf("async CPUs %v, want the effective CPU", cpus)
		}
	}
	if d.PCI.Address != "0000:1a:00.0" || d.PCI.NUMANode.V != 0 || len(d.PCI.MSIIRQs) != 17 {
		t.Errorf("PCI %+v", d.PCI)
	}
}

// prefixFault fails every call on a path below one of its prefixes.
type prefixFault struct {
	hostfs.FS
	prefixes []string
	err      error
}

func (p prefixFault) fail(name string) error {
	for _, pre := range p.prefixes {
		if strings.HasPrefix(name, pre) {
			return &fs.PathError{Op: "open", Path: name, Err: p.err}
		}
	}
	return nil
}

func (p prefixFault) ReadFile(name string) ([]byte, error) {
	if err := p.fail(name); err != nil {
		return nil, err
	}
	return p.FS.ReadFile(name)
}

func (p prefixFault) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := p.fail(name); err != nil {
		return nil, err
	}
	return p.FS.ReadDir(name)
}

// TestReadBadInput: the "bad input" list on a healthy host.
func TestReadBadInput(t *testing.T) {
	host := fixtureHost(t, "numa-remote")
	for _, tc := range []struct {
		name   string
		mutate func(h *hostfs.Host)
		check  func(t *testing.T, s *Snapshot)
	}{
		{
			name: "container hides /proc/irq: IRQs counted, placement unknown, no error",
			mutate: func(h *hostfs.Host) {
				h.Proc = prefixFault{FS: h.Proc, prefixes: []string{"irq/"}, err: syscall.ENOENT}
			},
			check: func(t *testing.T, s *Snapshot) {
				if len(s.Errors) != 0 {
					t.Errorf("errors %v", s.Errors)
				}
				for i := range s.Devices {
					if w := facts(&s.Devices[i]); w.irqs != 16 || w.offNode != -1 || w.cpus != -1 {
						t.Errorf("%s: %+v", s.Devices[i].Name, w)
					}
				}
			},
		},
		{
			name: "/proc/irq unreadable (EACCES): an error per file, placement unknown",
			mutate: func(h *hostfs.Host) {
				h.Proc = prefixFault{FS: h.Proc, prefixes: []string{"irq/2"}, err: syscall.EACCES}
			},
			check: func(t *testing.T, s *Snapshot) {
				// mlx5_1's IRQs are 200-216: both files each
				if len(s.Errors) != 2*17 || !errors.Is(s.Errors[0], syscall.EACCES) {
					t.Errorf("%d errors: %v", len(s.Errors), s.Errors)
				}
				if w := facts(&s.Devices[0]); w.offNode != 16 {
					t.Errorf("mlx5_0 lost its facts: %+v", w)
				}
				if w := facts(&s.Devices[1]); w.irqs != 16 || w.offNode != -1 || w.cpus != -1 {
					t.Errorf("mlx5_1: %+v", w)
				}
			},
		},
		{
			name: "/proc/interrupts unreadable: one error, PCI facts kept, no IRQ facts",
			mutate: func(h *hostfs.Host) {
				h.Proc = &hostfstest.Faulty{Base: h.Proc, Errors: map[string]error{"interrupts": syscall.EIO}}
			},
			check: func(t *testing.T, s *Snapshot) {
				if len(s.Errors) != 1 || !errors.Is(s.Errors[0], syscall.EIO) || s.Interrupts != nil {
					t.Errorf("errors %v", s.Errors)
				}
				for i := range s.Devices {
					d := &s.Devices[i]
					if w := facts(d); d.Keyed() || w.irqs != -1 || !d.PCI.LocalCPUs.OK {
						t.Errorf("%s: %+v", d.Name, w)
					}
				}
			},
		},
		{
			name: "/proc/interrupts without a header",
			mutate: func(h *hostfs.Host) {
				h.Proc = &hostfstest.Faulty{Base: h.Proc, Contents: map[string][]byte{"interrupts": []byte("garbage\n")}}
			},
			check: func(t *testing.T, s *Snapshot) {
				if len(s.Errors) != 1 || !errors.Is(s.Errors[0], ErrNoHeader) {
					t.Errorf("errors %v", s.Errors)
				}
			},
		},
		{
			name: "process table unreadable: irqbalance unknown, IRQs intact",
			mutate: func(h *hostfs.Host) {
				h.Proc = &hostfstest.Faulty{Base: h.Proc, Errors: map[string]error{".": syscall.EACCES}}
			},
			check: func(t *testing.T, s *Snapshot) {
				if s.Irqbalance.OK || len(s.Errors) != 1 {
					t.Errorf("irqbalance %+v, errors %v", s.Irqbalance, s.Errors)
				}
				if w := facts(&s.Devices[1]); w.cpus != 1 {
					t.Errorf("mlx5_1: %+v", w)
				}
			},
		},
		{
			name: "no local_cpulist: no off-node count, CPUs still known",
			mutate: func(h *hostfs.Host) {
				h.Sys = &hostfstest.Faulty{Base: h.Sys, Errors: map[string]error{
					"class/infiniband/mlx5_0/device/local_cpulist": syscall.ENOENT}}
			},
			check: func(t *testing.T, s *Snapshot) {
				if len(s.Errors) != 1 {
					t.Errorf("errors %v", s.Errors)
				}
				if w := facts(&s.Devices[0]); w.offNode != -1 || w.cpus != 16 {
					t.Errorf("mlx5_0: %+v", w)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := host
			tc.mutate(&h)
			s, err := Read(context.Background(), h, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Devices) != 2 {
				t.Fatalf("%d devices", len(s.Devices))
			}
			tc.check(t, s)
		})
	}
}

func TestReadNoRDMA(t *testing.T) {
	h := fixtureHost(t, "numa-remote")
	h.Sys = &hostfstest.Faulty{Base: h.Sys, Errors: map[string]error{"class/infiniband": syscall.ENOENT}}
	if _, err := Read(context.Background(), h, nil); !errors.Is(err, infiniband.ErrNoClass) {
		t.Fatalf("err = %v, want ErrNoClass", err)
	}
}

func TestReadKeep(t *testing.T) {
	s, err := Read(context.Background(), fixtureHost(t, "numa-remote"), func(n string) bool { return n == "mlx5_1" })
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Devices) != 1 || s.Devices[0].Name != "mlx5_1" || len(s.Devices[0].IRQs) != 17 {
		t.Fatalf("devices %+v", s.Devices)
	}
}

// withInterrupts is host with /proc/interrupts rewritten by edit.
func withInterrupts(t *testing.T, host hostfs.Host, edit func(string) string) hostfs.Host {
	t.Helper()
	b, err := host.Proc.ReadFile("interrupts")
	if err != nil {
		t.Fatal(err)
	}
	host.Proc = &hostfstest.Faulty{Base: host.Proc, Contents: map[string][]byte{"interrupts": []byte(edit(string(b)))}}
	return host
}

// TestReadChipForms: the numa-remote host's IRQs printed with the chip and
// hwirq/flow columns of other platforms (the forms of the recorded dumps in
// testdata/) give the same device facts as with its own
// "IR-PCI-MSIX-<BDF>   N-edge" columns.
func TestReadChipForms(t *testing.T) {
	msix := regexp.MustCompile(`IR-PCI-MSIX-([0-9a-f:.]+) +([0-9]+)-edge`)
	want := map[string]devWant{
		"mlx5_0": {completion: 16, control: 1, irqs: 16, offNode: 16, cpus: 16, cpuList: "0-15"},
		"mlx5_1": {completion: 16, control: 1, irqs: 16, offNode: 16, cpus: 1, cpuList: "0"},
	}
	for _, tc := range []struct{ name, columns string }{
		{"Hyper-V vPCI (hwirq glued to the flow)", "Hyper-V PCIe MSI 27015344619${2}-edge"},
		{"arm64 GICv3 ITS (trigger column, no flow)", "  ITS-MSI 5242${2} Edge"},
		{"arm64 per-device ITS domain", "ITS-PCI-MSIX-${1}   ${2} Edge"},
		{"x86 without remapping", "PCI-MSIX-${1}  ${2}-edge"},
		{"4.x-6.1 IR-PCI-MSI with the BDF in the hwirq", "IR-PCI-MSI 1245${2}-edge"},
		{"3.10 (flow in the chip)", "  PCI-MSI-edge"},
		{"Xen PIRQ (flow only)", "xen-pirq    -msi-x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := withInterrupts(t, fixtureHost(t, "numa-remote"), func(s string) string {
				return msix.ReplaceAllString(s, tc.columns)
			})
			s, err := Read(context.Background(), host, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]devWant{}
			for i := range s.Devices {
				got[s.Devices[i].Name] = facts(&s.Devices[i])
			}
			if fmt.Sprint(got) != fmt.Sprint(want) || len(s.Errors) != 0 {
				t.Errorf("devices:\n got %v\nwant %v\nerrors %v", got, want, s.Errors)
			}
		})
	}
}

// TestReadUnclassified: IRQs that belong to a device but whose names no
// naming rule knows withhold the device's counts (absent, never 0) with an
// ErrUnclassified naming the file and the device; a device whose IRQs are
// all known control vectors has 0 completion IRQs, no error.
func TestReadUnclassified(t *testing.T) {
	for _, tc := range []struct {
		name    string
		host    string
		edit    func(string) string
		devices map[string]devWant
		errs    []string // substrings, one error each
	}{
		{
			name: "mlx5 names in an unknown form carry the device's address",
			host: "numa-remote",
			edit: func(s string) string { return strings.ReplaceAll(s, "mlx5_comp", "mlx5_cq") },
			devices: map[string]devWant{
				"mlx5_0": {control: 1, other: 16, irqs: -1, offNode: -1, cpus: -1},
				"mlx5_1": {control: 1, other: 16, irqs: -1, offNode: -1, cpus: -1},
			},
			errs: []string{
				`parse interrupts: mlx5_0 (0000:98:00.0): 16 IRQ(s) such as 181 "mlx5_cq0@pci:0000:98:00.0": IRQ names in no known naming form`,
				`parse interrupts: mlx5_1 (0000:c8:00.0): 16 IRQ(s)`,
			},
		},
		{
			name: "no IRQ of a device keyed by msi_irqs/ matches a rule",
			host: "iwarp-i40iw",
			edit: func(s string) string {
				return strings.NewReplacer(" i40iw\n", " i40iw-aeq\n", " CEQ\n", " i40iw-ceq\n").Replace(s)
			},
			devices: map[string]devWant{"i40iw0": {other: 10, irqs: -1, offNode: -1, cpus: -1}},
			errs:    []string{"parse interrupts: i40iw0 (0000:09:00.0): 10 IRQ(s) such as 40 \"i40e-0000:09:00.0:misc\""},
		},
		{
			name: "only the control vector (completion vectors not allocated yet)",
			host: "numa-remote",
			edit: func(s string) string {
				return regexp.MustCompile(`(?m)^.*mlx5_comp[0-9]+@pci:0000:98:00\.0\n`).ReplaceAllString(s, "")
			},
			devices: map[string]devWant{
				"mlx5_0": {control: 1, irqs: 0, offNode: 0, cpus: 0, cpuList: ""},
				"mlx5_1": {completion: 16, control: 1, irqs: 16, offNode: 16, cpus: 1, cpuList: "0"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Read(context.Background(), withInterrupts(t, fixtureHost(t, tc.host), tc.edit), nil)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]devWant{}
			for i := range s.Devices {
				got[s.Devices[i].Name] = facts(&s.Devices[i])
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.devices) {
				t.Errorf("devices:\n got %v\nwant %v", got, tc.devices)
			}
			if len(s.Errors) != len(tc.errs) {
				t.Fatalf("%d errors, want %d: %v", len(s.Errors), len(tc.errs), s.Errors)
			}
			for i, want := range tc.errs {
				if !errors.Is(s.Errors[i], ErrUnclassified) || !strings.Contains(s.Errors[i].Error(), want) {
					t.Errorf("error %d = %v, want ErrUnclassified containing %q", i, s.Errors[i], want)
				}
			}
		})
	}
}
