// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package irq

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// realDump returns the /proc/interrupts part of a recorded dump: the lines
// after the shell prompt, up to the next prompt. header replaces a missing
// CPU header (the homelab dump was taken through grep).
func realDump(t testing.TB, file, header string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	if header != "" {
		out = append(out, header)
	}
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		prompt := strings.Contains(l, "# ") || strings.Contains(l, "$ ") || strings.HasPrefix(l, "> ") || strings.HasPrefix(l, "❯ ")
		if prompt && strings.Contains(l, "/proc/interrupts") {
			in = true
			continue
		}
		if in && (prompt || strings.TrimSpace(l) == "") {
			break
		}
		if in {
			out = append(out, l)
		}
	}
	return []byte(strings.Join(out, "\n") + "\n")
}

// rowsFile matches the testdata files that hold rows without their CPU
// header (testdata/README.md); the number is the CPU column count.
var rowsFile = regexp.MustCompile(`-rows-.*-([0-9]+)cpu-`)

// recordedDump returns the /proc/interrupts of a testdata file: the rows
// under a header of their CPU count, the dump after a shell prompt, or the
// whole file.
func recordedDump(t testing.TB, file string) []byte {
	t.Helper()
	if m := rowsFile.FindStringSubmatch(file); m != nil {
		n, _ := strconv.Atoi(m[1])
		b, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		return append([]byte(cpuHeader(n)+"\n"), b...)
	}
	if d := realDump(t, file, ""); len(d) > 1 {
		return d
	}
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recordedFiles are the testdata dumps of TestParseRecordedForms.
func recordedFiles(t testing.TB) []string {
	files, err := filepath.Glob("testdata/proc-interrupts-*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded dumps: %v", err)
	}
	for i := range files {
		files[i] = filepath.Base(files[i])
	}
	return files
}

func cpuHeader(n int) string {
	var b strings.Builder
	for c := 0; c < n; c++ {
		fmt.Fprintf(&b, "       CPU%-3d", c)
	}
	return b.String()
}

// TestParseRealDumps: every recorded dump, every naming era in it.
func TestParseRealDumps(t *testing.T) {
	type irqWant struct {
		num                        int
		chip, hw, trig, flow, name string
		col                        int // a column to check
		count                      uint64
		kind                       Kind
		channel                    int
		address, chipTo            string
	}
	for _, tc := range []struct {
		file, header string
		cpus         []int
		irqs         int
		perAddr      map[string][3]int // completion, control, other
		check        []irqWant
	}{
		{
			file: "proc-interrupts-mlx5-el7-3.10-azure-lkml-2023.txt",
			cpus: []int{0, 1, 2, 3, 4, 5, 6, 7},
			// 0 1 3 4 8 9 12 14 15, 24-26 28-35, 36-38 40-47
			irqs:    31,
			perAddr: map[string][3]int{"8b76:00:02.0": {8, 3, 0}, "83a4:00:02.0": {8, 3, 0}},
			check: []irqWant{
				{num: 0, chip: "IO-APIC-edge", name: "timer", col: 0, count: 9881, kind: Other, channel: -1},
				{num: 3, chip: "IO-APIC-edge", name: "", col: 7, count: 856, kind: Other, channel: -1},
				{num: 12, chip: "IO-APIC-edge", name: "i8042", col: 7, count: 5, kind: Other, channel: -1}, // no leading space
				{num: 25, chip: "PCI-MSI-edge", name: "mlx5_cmd_eq@pci:8b76:00:02.0", col: 0, count: 19694, kind: Control, channel: -1, address: "8b76:00:02.0"},
				{num: 26, chip: "PCI-MSI-edge", name: "mlx5_async_eq@pci:8b76:00:02.0", kind: Control, channel: -1, address: "8b76:00:02.0"},
				{num: 24, chip: "PCI-MSI-edge", name: "mlx5_pages_eq@pci:8b76:00:02.0", kind: Control, channel: -1, address: "8b76:00:02.0"},
				{num: 28, chip: "PCI-MSI-edge", name: "mlx5_comp0@pci:8b76:00:02.0", col: 0, count: 123648, kind: Completion, channel: 0, address: "8b76:00:02.0"},
				{num: 47, chip: "PCI-MSI-edge", name: "mlx5_comp7@pci:83a4:00:02.0", col: 0, count: 12610, kind: Completion, channel: 7, address: "83a4:00:02.0"},
			},
		},
		{
			file:    "proc-interrupts-mlx5-recent-kernel-cx-100g-homelab.txt",
			header:  cpuHeader(12),
			cpus:    []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
			irqs:    15,
			perAddr: map[string][3]int{"0000:01:00.0": {12, 1, 0}, "0000:01:00.1": {1, 1, 0}},
			check: []irqWant{
				{num: 98, chip: "IR-PCI-MSIX-0000:01:00.0", hw: "0", flow: "edge", name: "mlx5_async0@pci:0000:01:00.0", col: 10, count: 23274, kind: Control, channel: -1, address: "0000:01:00.0", chipTo: "0000:01:00.0"},
				{num: 99, chip: "IR-PCI-MSIX-0000:01:00.0", hw: "1", flow: "edge", name: "mlx5_comp0@pci:0000:01:00.0", col: 7, count: 4360, kind: Completion, channel: 0, address: "0000:01:00.0", chipTo: "0000:01:00.0"},
				{num: 102, chip: "IR-PCI-MSIX-0000:01:00.1", hw: "1", flow: "edge", name: "mlx5_comp0@pci:0000:01:00.1", col: 0, count: 0, kind: Completion, channel: 0, address: "0000:01:00.1", chipTo: "0000:01:00.1"},
				{num: 114, chip: "IR-PCI-MSIX-0000:01:00.0", hw: "7", flow: "edge", name: "mlx5_comp6@pci:0000:01:00.0", col: 8, count: 1024467, kind: Completion, channel: 6, address: "0000:01:00.0", chipTo: "0000:01:00.0"},
				{num: 117, chip: "IR-PCI-MSIX-0000:01:00.0", hw: "10", flow: "edge", name: "mlx5_comp9@pci:0000:01:00.0", col: 11, count: 651437, kind: Completion, channel: 9, address: "0000:01:00.0", chipTo: "0000:01:00.0"},
			},
		},
	} {
		t.Run(tc.file, func(t *testing.T) {
			in, err := ParseInterrupts(realDump(t, tc.file, tc.header))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(in.CPUs, tc.cpus) {
				t.Errorf("CPUs %v, want %v", in.CPUs, tc.cpus)
			}
			if len(in.IRQs) != tc.irqs || len(in.Skipped) != 0 {
				t.Errorf("%d IRQs, skipped %v; want %d, none", len(in.IRQs), in.Skipped, tc.irqs)
			}
			got := map[string][3]int{}
			for _, q := range in.IRQs {
				if len(q.Counts) != len(tc.cpus) {
					t.Errorf("IRQ %d has %d counts", q.Number, len(q.Counts))
				}
				v := Classify(q.Name)
				if v.Address == "" {
					continue
				}
				c := got[v.Address]
				switch v.Kind {
				case Completion:
					c[0]++
				case Control:
					c[1]++
				default:
					c[2]++
				}
				got[v.Address] = c
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.perAddr) {
				t.Errorf("per address (completion, control, other) = %v, want %v", got, tc.perAddr)
			}
			for _, w := range tc.check {
				i := slices.IndexFunc(in.IRQs, func(q IRQ) bool { return q.Number == w.num })
				if i < 0 {
					t.Errorf("IRQ %d missing", w.num)
					continue
				}
				q := in.IRQs[i]
				if got := [...]string{q.Chip, q.HWIRQ, q.Trigger, q.Flow, q.Name}; got != [...]string{w.chip, w.hw, w.trig, w.flow, w.name} {
					t.Errorf("IRQ %d: chip, hwirq, trigger, flow, name = %q, want %q", w.num, got, [...]string{w.chip, w.hw, w.trig, w.flow, w.name})
				}
				if q.Counts[w.col] != w.count {
					t.Errorf("IRQ %d CPU column %d = %d, want %d", w.num, w.col, q.Counts[w.col], w.count)
				}
				v := Classify(q.Name)
				if v.Kind != w.kind || v.Channel != w.channel || v.Address != w.address {
					t.Errorf("IRQ %d Classify = %+v, want kind %v channel %d address %q", w.num, v, w.kind, w.channel, w.address)
				}
				if a := ChipAddress(q.Chip); a != w.chipTo {
					t.Errorf("IRQ %d ChipAddress = %q, want %q", w.num, a, w.chipTo)
				}
			}
		})
	}
}

// TestParseForms: formats and faults not in the recorded dumps.
func TestParseForms(t *testing.T) {
	type row struct {
		num                        int
		counts                     []uint64
		chip, hw, trig, flow, name string
	}
	for _, tc := range []struct {
		name        string
		in          string
		cpus        []int
		rows        []row
		skipped     []int
		wantErr     error
		wantErrText string
	}{
		{
			name: "offline CPU leaves a gap in the header",
			in: "           CPU0       CPU1       CPU3\n" +
				"  99:         10          0          7  IR-PCI-MSIX-0000:01:00.0    1-edge      mlx5_comp0@pci:0000:01:00.0\n",
			cpus: []int{0, 1, 3},
			rows: []row{{99, []uint64{10, 0, 7}, "IR-PCI-MSIX-0000:01:00.0", "1", "", "edge", "mlx5_comp0@pci:0000:01:00.0"}},
		},
		{
			name: "4.x IR-PCI-MSI with hwirq, hfi1 names with spaces, shared line",
			in: "       CPU0   CPU1\n" +
				" 120:     5     6   IR-PCI-MSI 12582913-edge      hfi1_0 sdma0\n" +
				"  16:     1     2   IR-IO-APIC   16-fasteoi   ehci_hcd:usb1, nouveau\n",
			cpus: []int{0, 1},
			rows: []row{
				{120, []uint64{5, 6}, "IR-PCI-MSI", "12582913", "", "edge", "hfi1_0 sdma0"},
				{16, []uint64{1, 2}, "IR-IO-APIC", "16", "", "fasteoi", "ehci_hcd:usb1, nouveau"},
			},
		},
		{
			name: "arm64 GIC and ITS with a separate Edge/Level column, IPI lines",
			in: "           CPU0       CPU1\n" +
				" 11:      12345      23456     GICv3  27 Level     arch_timer\n" +
				" 40:          0          9   ITS-MSI 65536 Edge      nvme0q0\n" +
				"IPI0:       100        200       Rescheduling interrupts\n",
			cpus: []int{0, 1},
			rows: []row{
				{11, []uint64{12345, 23456}, "GICv3", "27", "Level", "", "arch_timer"},
				{40, []uint64{0, 9}, "ITS-MSI", "65536", "Edge", "", "nvme0q0"},
			},
		},
		{
			name: "no chip (None), no domain hwirq, no handler",
			in: "  CPU0\n" +
				"  7:  3   None   -edge      \n" +
				"  8:  4   xen-dyn    -event     xenbus\n",
			cpus: []int{0},
			rows: []row{
				{7, []uint64{3}, "None", "", "", "edge", ""},
				{8, []uint64{4}, "xen-dyn", "", "", "event", "xenbus"},
			},
		},
		{
			name: "torn, short, garbage and over-long lines are skipped and counted",
			in: "      CPU0   CPU1   CPU2\n" +
				"  1:     1      2      3   IO-APIC   1-edge   i8042\n" +
				"  2:     1      2\n" + // torn mid-row
				"  3:     1      x      3   IO-APIC   3-edge   bad\n" + // not a number
				"  4:     1      2      3\n" + // nothing after the counts
				"  5:     1      2      3      4   IO-APIC   5-edge   extra\n" + // more counts than CPUs
				"  6:     1      2      3abc   IO-APIC   6-edge   glued\n" +
				"  7:     1      2      99999999999999999999999   IO-APIC   7-edge   overflow\n" +
				"garbage without a colon\n" +
				"  8\n" +
				" LOC:     5      5      5   Local timer interrupts\n" +
				" ERR:     0\n" +
				"  9:     7      8      9   IO-APIC   9-fasteoi   acpi\n",
			cpus: []int{0, 1, 2},
			rows: []row{
				{1, []uint64{1, 2, 3}, "IO-APIC", "1", "", "edge", "i8042"},
				{9, []uint64{7, 8, 9}, "IO-APIC", "9", "", "fasteoi", "acpi"},
			},
			skipped: []int{3, 4, 5, 6, 7, 8, 9, 10},
		},
		{
			name: "blank lines and CRLF",
			in:   "\n\n   CPU0 CPU1\r\n 5:  1  2  PCI-MSI-edge  mlx4-comp-0@pci:0000:81:00.0\r\n\n",
			cpus: []int{0, 1},
			rows: []row{{5, []uint64{1, 2}, "PCI-MSI-edge", "", "", "", "mlx4-comp-0@pci:0000:81:00.0"}},
		},
		{name: "empty", in: "", wantErr: ErrNoHeader},
		{name: "no header", in: "  98:  0  0  IR-PCI-MSIX-0000:01:00.0  0-edge  mlx5_async0@pci:0000:01:00.0\n", wantErr: ErrNoHeader},
		{name: "header out of order", in: "  CPU1 CPU0\n", wantErr: ErrNoHeader, wantErrText: "out of order"},
		{name: "header garbage", in: "  CPU0 CPUx\n", wantErr: ErrNoHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := ParseInterrupts([]byte(tc.in))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(fmt.Sprint(err), tc.wantErrText) {
					t.Fatalf("err = %v, want %v %q", err, tc.wantErr, tc.wantErrText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(in.CPUs, tc.cpus) {
				t.Errorf("CPUs %v, want %v", in.CPUs, tc.cpus)
			}
			var skipped []int
			for _, l := range in.Skipped {
				skipped = append(skipped, l.Num)
				if !strings.Contains(tc.in, l.Text) {
					t.Errorf("skipped line %d text %q is not in the input", l.Num, l.Text)
				}
			}
			if !slices.Equal(skipped, tc.skipped) {
				t.Errorf("skipped lines %v, want %v", skipped, tc.skipped)
			}
			if len(in.IRQs) != len(tc.rows) {
				t.Fatalf("%d IRQs %+v, want %d", len(in.IRQs), in.IRQs, len(tc.rows))
			}
			for i, w := range tc.rows {
				q := in.IRQs[i]
				got := [...]string{q.Chip, q.HWIRQ, q.Trigger, q.Flow, q.Name}
				want := [...]string{w.chip, w.hw, w.trig, w.flow, w.name}
				if q.Number != w.num || !slices.Equal(q.Counts, w.counts) || got != want {
					t.Errorf("row %d = %d %v %q, want %d %v %q", i, q.Number, q.Counts, got, w.num, w.counts, want)
				}
			}
		})
	}
}

// TestCountsAreWindows: appending to one IRQ's counts never overwrites the
// next IRQ's.
func TestCountsAreWindows(t *testing.T) {
	in, err := ParseInterrupts(generateInterrupts(4, 20))
	if err != nil {
		t.Fatal(err)
	}
	next := slices.Clone(in.IRQs[1].Counts)
	_ = append(in.IRQs[0].Counts, 42)
	if !slices.Equal(in.IRQs[1].Counts, next) {
		t.Fatal("IRQ 0's counts share capacity with IRQ 1's")
	}
}

// TestParseAllocations: allocations grow with IRQs, never with fields (the
// issue: one pass, allocate per IRQ, not per field). A 512-CPU, 4096-IRQ
// file has two million fields.
func TestParseAllocations(t *testing.T) {
	for _, size := range []struct{ cpus, irqs int }{{8, 16}, {64, 512}, {512, 4096}} {
		data := generateInterrupts(size.cpus, size.irqs)
		in, err := ParseInterrupts(data)
		if err != nil || len(in.IRQs) != size.irqs || len(in.Skipped) != 0 {
			t.Fatalf("%d×%d: %d IRQs, %d skipped, %v", size.cpus, size.irqs, len(in.IRQs), len(in.Skipped), err)
		}
		// one string per IRQ (its name columns) plus a fixed few
		allocs := testing.AllocsPerRun(3, func() { _, _ = ParseInterrupts(data) })
		if limit := float64(size.irqs + 16); allocs > limit {
			t.Errorf("%d CPUs × %d IRQs (%d fields): %.0f allocations per parse, want at most %.0f",
				size.cpus, size.irqs, size.cpus*size.irqs, allocs, limit)
		}
	}
}

func TestGeneratedShape(t *testing.T) {
	in, err := ParseInterrupts(generateInterrupts(512, 200))
	if err != nil {
		t.Fatal(err)
	}
	if len(in.CPUs) != 512 || in.CPUs[511] != 511 {
		t.Fatalf("CPUs %d", len(in.CPUs))
	}
	q := in.IRQs[8+65]
	v := Classify(q.Name)
	if q.Chip != "IR-PCI-MSIX-0000:1a:00.1" || v.Kind != Completion || v.Channel != 0 || v.Address != "0000:1a:00.1" {
		t.Errorf("generated row %+v classified %+v", q, v)
	}
}

func FuzzParseInterrupts(f *testing.F) {
	f.Add(realDump(f, "proc-interrupts-mlx5-el7-3.10-azure-lkml-2023.txt", ""))
	f.Add(realDump(f, "proc-interrupts-mlx5-recent-kernel-cx-100g-homelab.txt", cpuHeader(12)))
	for _, p := range fixtureInterrupts(f) {
		if b, err := os.ReadFile(p); err == nil && len(b) < 64<<10 {
			f.Add(b)
		}
	}
	for _, file := range recordedFiles(f) {
		f.Add(recordedDump(f, file))
	}
	f.Add(generateInterrupts(3, 12))
	f.Add([]byte("  CPU0 CPU2\n 1: 1 2 IO-APIC 1-edge a\n 2: 1\n"))
	// one row of each chip form, and forms that are not quite one
	for _, tail := range []string{
		"Hyper-V PCIe MSI 2701534461953-edge      mlx5_comp0@pci:4ea0:00:02.0",
		"ITS-MSI 81920 Edge      ena-mgmnt@pci:0000:00:05.0",
		"xen-dyn     Edge    -event     xenbus",
		"xen-pirq   1-ioapic-edge  i8042",
		"xen-pirq    -msi-x     ens4",
		"amd_gpio   90  ITE8227:00",
		"PCI-MSI-edge      iwlwifi: queue 1",
		"Hyper-V PCIe MSI 1073741824-edge",
		"Hyper-V PCIe MSI      nvme0q0",
		"GICv3 562 Level     nvme0q0, nvme0q1",
		"IR-PCI-MSIX-0000:01:00.0   12-  x",
		"a b c 1 Edge -",
	} {
		f.Add([]byte("  CPU0\n 5: 7 " + tail + "\n"))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := ParseInterrupts(data)
		if err != nil {
			if in != nil {
				t.Fatal("result with an error")
			}
			return
		}
		if len(in.CPUs) == 0 {
			t.Fatal("no CPUs without an error")
		}
		for i, c := range in.CPUs {
			if c < 0 || i > 0 && c <= in.CPUs[i-1] {
				t.Fatalf("CPUs %v", in.CPUs)
			}
		}
		for i, l := range in.Skipped {
			if l.Num <= 0 || i > 0 && l.Num <= in.Skipped[i-1].Num || strings.Contains(l.Text, "\n") {
				t.Fatalf("skipped %+v", in.Skipped)
			}
		}
		for _, q := range in.IRQs {
			if len(q.Counts) != len(in.CPUs) || q.Number < 0 || q.Chip == "" {
				t.Fatalf("bad row %+v", q)
			}
			var sum uint64
			for _, c := range q.Counts {
				sum += c
			}
			if q.Total != sum {
				t.Fatalf("IRQ %d total %d, counts sum to %d", q.Number, q.Total, sum)
			}
			if strings.ContainsAny(q.Chip+q.HWIRQ+q.Trigger+q.Flow+q.Name, "\n") {
				t.Fatalf("row spans lines: %+v", q)
			}
			// the columns are trimmed words of the line, in the kernel's order
			if q.Chip != strings.Trim(q.Chip, " \t\r") || q.Name != strings.Trim(q.Name, " \t\r") ||
				strings.ContainsAny(q.HWIRQ+q.Trigger+q.Flow, " \t") {
				t.Fatalf("untrimmed columns: %+v", q)
			}
			if q.HWIRQ != "" && !allDigits(q.HWIRQ) || q.Trigger != "" && q.Trigger != "Edge" && q.Trigger != "Level" {
				t.Fatalf("bad hwirq or trigger: %+v", q)
			}
			_ = Classify(q.Name)
			_ = ChipAddress(q.Chip)
		}
	})
}

func fixtureInterrupts(t testing.TB) []string {
	files, _ := filepath.Glob("../../../fixtures/hosts/*/proc/interrupts")
	return files
}

// rowWant is one row of a recorded dump: its columns as the parser must
// split them, and what the name says (kind, channel, address) and the chip
// column's address.
type rowWant struct {
	num                        int
	chip, hw, trig, flow, name string
	kind                       Kind
	address, chipTo            string
}

// TestParseRecordedForms: a row of every chip naming in the recorded dumps
// of testdata/ (sources in its README), split into chip, hwirq, trigger,
// flow and name; every line is a row or an architecture line.
func TestParseRecordedForms(t *testing.T) {
	const hv = "Hyper-V PCIe MSI"
	for _, tc := range []struct {
		file string
		cpus int
		irqs int
		rows []rowWant
	}{
		{
			file: "proc-interrupts-hyperv-virtio-12cpu-nasir17git.txt", cpus: 12, irqs: 7,
			rows: []rowWant{
				{num: 8, chip: "IO-APIC", hw: "8", flow: "edge", name: "rtc0"},
				{num: 9, chip: "IO-APIC", hw: "9", flow: "fasteoi", name: "acpi"},
				{num: 24, chip: hv, hw: "1703491403776", flow: "edge", name: "virtio0-config"},
				{num: 28, chip: hv, hw: "7177964093442", flow: "edge", name: "virtio1-requests.0"},
			},
		},
		{
			file: "proc-interrupts-rows-hyperv-mlx5-2cpu-redpanda-rpk.txt", cpus: 2, irqs: 3,
			rows: []rowWant{
				{num: 33, chip: hv, hw: "2701534461952", flow: "edge", name: "mlx5_async0@pci:4ea0:00:02.0", kind: Control, address: "4ea0:00:02.0"},
				{num: 34, chip: hv, hw: "2701534461953", flow: "edge", name: "mlx5_comp0@pci:4ea0:00:02.0", kind: Completion, address: "4ea0:00:02.0"},
				{num: 35, chip: hv, hw: "2701534461954", flow: "edge", name: "mlx5_comp1@pci:4ea0:00:02.0", kind: Completion, address: "4ea0:00:02.0"},
			},
		},
		{
			file: "proc-interrupts-rows-hyperv-mana-1cpu-redpanda-rpk.txt", cpus: 1, irqs: 3,
			rows: []rowWant{
				{num: 32, chip: hv, hw: "2147483648", flow: "edge", name: "mana_hwc@pci:7870:00:00.0", kind: Control, address: "7870:00:00.0"},
				{num: 33, chip: hv, hw: "2147483649", flow: "edge", name: "mana_q0@pci:7870:00:00.0", kind: Completion, address: "7870:00:00.0"},
			},
		},
		{
			file: "proc-interrupts-rows-hyperv-mana-4cpu-netdev-2024.txt", cpus: 4, irqs: 3,
			rows: []rowWant{
				{num: 27, chip: hv, hw: "4138200989699", flow: "edge", name: "mana_q2@pci:7870:00:00.0", kind: Completion, address: "7870:00:00.0"},
			},
		},
		{
			file: "proc-interrupts-rows-gve-2cpu-redpanda-rpk.txt", cpus: 2, irqs: 6,
			rows: []rowWant{
				{num: 26, chip: "ITS-MSI", hw: "0", trig: "Edge", name: "eth%d-ntfy-block.0"},
				{num: 58, chip: "ITS-MSI", hw: "32", trig: "Edge", name: "eth%d-mgmnt"},
				{num: 168, chip: "PCI-MSIX-0000:00:08.0", hw: "30", flow: "edge", name: "gve-ntfy-blk0@pci:0000:00:08.0", address: "0000:00:08.0", chipTo: "0000:00:08.0"},
			},
		},
		{
			file: "proc-interrupts-arm64-graviton-ena-node-exporter.txt", cpus: 8, irqs: 51,
			rows: []rowWant{
				{num: 10, chip: "GICv3", hw: "27", trig: "Level", name: "arch_timer"},
				{num: 17, chip: "GICv3", hw: "48", trig: "Edge", name: "ACPI:Ged"},
				{num: 50, chip: "ARMH0061:00", hw: "3", trig: "Edge", name: "ACPI:Event"},
				{num: 51, chip: "ITS-MSI", hw: "65536", trig: "Edge", name: "nvme0q0"},
				{num: 57, chip: "ITS-MSI", hw: "81920", trig: "Edge", name: "ena-mgmnt@pci:0000:00:05.0", address: "0000:00:05.0"},
				{num: 65, chip: "ITS-MSI", hw: "81928", trig: "Edge", name: "eth0-Tx-Rx-7"},
			},
		},
		{
			file: "proc-interrupts-arm64-xen-dom0-versal-xen-devel-2023.txt", cpus: 2, irqs: 30,
			rows: []rowWant{
				{num: 0, chip: "xen-dyn", trig: "Edge", flow: "event", name: "xenbus"},
				{num: 11, chip: "GICv3", hw: "27", trig: "Level", name: "arch_timer"},
				{num: 15, chip: "RC-Event", hw: "0", trig: "Level", name: "LINK_DOWN"},
				{num: 35, chip: "xen-dyn", trig: "Edge", flow: "virq", name: "hvc_console"},
				{num: 37, chip: "ITS-MSI", hw: "524288", trig: "Edge", name: "nvme0q0"},
				{num: 38, chip: "GICv3", hw: "176", trig: "Level", name: "sysmon-irq"},
				{num: 42, chip: "xen-dyn-lateeoi", trig: "Edge", flow: "event", name: "evtchn:xenstored"},
			},
		},
		{
			file: "proc-interrupts-xen-hvm-pirq-qemu-devel-2023.txt", cpus: 2, irqs: 25,
			rows: []rowWant{
				{num: 0, chip: "IO-APIC", hw: "2", flow: "edge", name: "timer"},
				{num: 1, chip: "xen-pirq", hw: "1", flow: "ioapic-edge", name: "i8042"},
				{num: 9, chip: "xen-pirq", hw: "9", flow: "ioapic-level", name: "acpi"},
				{num: 12, chip: "xen-pirq", hw: "12", flow: "ioapic-edge", name: "i8042"},
				{num: 24, chip: "xen-percpu", flow: "virq", name: "timer0"},
				{num: 25, chip: "xen-percpu", flow: "ipi", name: "resched0"},
				{num: 36, chip: "xen-dyn", flow: "event", name: "xenbus"},
				{num: 37, chip: "xen-pirq", flow: "msi", name: "ahci[0000:00:03.0]"},
				{num: 38, chip: "xen-pirq", flow: "msi-x", name: "ens4"},
				{num: 42, chip: "xen-pirq", flow: "msi-x", name: "ens4-tx-1"},
			},
		},
		{
			file: "proc-interrupts-amd-ryzen-6x-msix-myblackhole.txt", cpus: 16, irqs: 67,
			rows: []rowWant{
				{num: 0, chip: "IR-IO-APIC", hw: "2", flow: "edge", name: "timer"},
				{num: 7, chip: "IR-IO-APIC", hw: "7", flow: "fasteoi", name: "pinctrl_amd"},
				{num: 25, chip: "IOMMU-MSI", hw: "0", flow: "edge", name: "AMD-Vi"},
				{num: 26, chip: "IR-PCI-MSI-0000:00:02.2", hw: "0", flow: "edge", name: "PCIe PME", chipTo: "0000:00:02.2"},
				{num: 29, chip: "amd_gpio", hw: "90", name: "ITE8227:00"},
				{num: 52, chip: "IR-PCI-MSIX-0000:02:00.0", hw: "1", flow: "edge", name: "nvme0q1", chipTo: "0000:02:00.0"},
				{num: 61, chip: "IR-PCI-MSIX-0000:02:00.0", hw: "10", flow: "edge", name: "nvme0q10", chipTo: "0000:02:00.0"},
				{num: 72, chip: "IR-PCI-MSIX-0000:01:00.0", hw: "0", flow: "edge", name: "iwlwifi:default_queue", chipTo: "0000:01:00.0"},
			},
		},
		{
			file: "proc-interrupts-rows-arm64-its-pci-8cpu-lkml-2024.txt", cpus: 8, irqs: 8,
			rows: []rowWant{
				{num: 208, chip: "ITS-PCI-MSI-0006:00:00.0", hw: "0", trig: "Edge", name: "PCIe PME, aerdrv", chipTo: "0006:00:00.0"},
				{num: 214, chip: "GICv3", hw: "562", trig: "Level", name: "nvme0q0, nvme0q1"},
				{num: 206, chip: "ITS-PCI-MSIX-0002:01:00.0", hw: "0", trig: "Edge", name: "nvme0q0", chipTo: "0002:01:00.0"},
			},
		},
	} {
		t.Run(tc.file, func(t *testing.T) {
			in, err := ParseInterrupts(recordedDump(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(in.CPUs) != tc.cpus || len(in.IRQs) != tc.irqs || len(in.Skipped) != 0 {
				t.Fatalf("%d CPUs, %d IRQs, skipped %+v; want %d, %d, none", len(in.CPUs), len(in.IRQs), in.Skipped, tc.cpus, tc.irqs)
			}
			for _, w := range tc.rows {
				i := slices.IndexFunc(in.IRQs, func(q IRQ) bool { return q.Number == w.num })
				if i < 0 {
					t.Errorf("IRQ %d missing", w.num)
					continue
				}
				checkRow(t, &in.IRQs[i], w)
			}
		})
	}
}

func checkRow(t *testing.T, q *IRQ, w rowWant) {
	t.Helper()
	got := [...]string{q.Chip, q.HWIRQ, q.Trigger, q.Flow, q.Name}
	if want := [...]string{w.chip, w.hw, w.trig, w.flow, w.name}; got != want {
		t.Errorf("IRQ %d: chip, hwirq, trigger, flow, name = %q, want %q", q.Number, got, want)
	}
	if v := Classify(q.Name); v.Kind != w.kind || v.Address != w.address {
		t.Errorf("IRQ %d: Classify(%q) = %+v, want kind %v address %q", q.Number, q.Name, v, w.kind, w.address)
	}
	if a := ChipAddress(q.Chip); a != w.chipTo {
		t.Errorf("IRQ %d: ChipAddress(%q) = %q, want %q", q.Number, q.Chip, a, w.chipTo)
	}
}
