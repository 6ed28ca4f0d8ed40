// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package irq reads where an RDMA device's interrupts go: the one parser for
// /proc/interrupts, the mapping of IRQs to devices by PCI address, each
// IRQ's allowed and effective CPUs from /proc/irq/N/, and whether irqbalance
// runs. The collectors and the placement checks share its typed snapshot.
package irq

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// Interrupts is a parsed /proc/interrupts.
type Interrupts struct {
	// CPUs are the CPU numbers of the count columns, from the header. The
	// kernel prints a column per online CPU only, so a hot-unplugged CPU
	// leaves a gap ("CPU0 CPU1 CPU3").
	CPUs []int
	// IRQs are the numbered lines in file order. Architecture lines (NMI,
	// LOC, ERR, IPI0, ...) are not kept.
	IRQs []IRQ
	// Skipped are the lines that were neither a numbered IRQ nor an
	// architecture line, or were cut short (a torn read, a header that
	// disagrees with the rows), in file order.
	Skipped []Line
}

// Line is a line of the file: its 1-based number and its text.
type Line struct {
	Num  int
	Text string
}

// IRQ is one numbered line.
type IRQ struct {
	Number int
	// Counts holds one count per column of Interrupts.CPUs.
	Counts []uint64
	// Chip is the irq-chip column, which may hold spaces: "PCI-MSI-edge"
	// (3.10, flow included), "IR-PCI-MSI", "IR-PCI-MSIX-0000:01:00.0"
	// (6.2+ per-device MSI domains), "ITS-MSI", "GICv3", "xen-pirq",
	// "Hyper-V PCIe MSI", "None".
	Chip string
	// HWIRQ is the hwirq number as printed ("1", "524288",
	// "2701534461953"); empty on kernels and chips that print none (3.10,
	// Xen event channels).
	HWIRQ string
	// Trigger is "Edge" or "Level" where the architecture prints the
	// trigger as a column of its own (arm64, GENERIC_IRQ_SHOW_LEVEL), else
	// empty.
	Trigger string
	// Flow is the flow handler's name printed after a dash ("edge",
	// "fasteoi", "msi-x", "ioapic-edge", "event"), empty when there is none
	// or it is glued into the chip column (3.10's "PCI-MSI-edge").
	Flow string
	// Name is the action name(s): "mlx5_comp0@pci:0000:01:00.0",
	// "hfi1_0 sdma3", or "a, b" for a shared line; empty for a line with
	// no handler.
	Name string
}

// Total is the sum of the per-CPU counts.
func (q *IRQ) Total() uint64 {
	var t uint64
	for _, c := range q.Counts {
		t += c
	}
	return t
}

// ErrNoHeader means the text does not start with the "CPU0 CPU1 ..." header,
// without which the count columns cannot be matched to CPUs.
var ErrNoHeader = errors.New("no CPU header line")

// ParseInterrupts parses /proc/interrupts in one pass over the bytes. The
// counts of every IRQ are a window of one shared slice and the chip, hwirq,
// trigger, flow and name columns are substrings of one string made from the
// line's tail,
// so a parse allocates once per IRQ at most, never per field, and the
// snapshot does not pin the file.
//
// The counts are read by the header's column count and the name is what
// follows the chip and hwirq/trigger columns, which is what stays stable
// across kernels and architectures (see research/sysfs.md §7). A line that
// does not fit is skipped and recorded, never guessed at.
func ParseInterrupts(data []byte) (*Interrupts, error) {
	in := &Interrupts{}
	pos, lineNo := 0, 0
	next := func() []byte {
		rest := data[pos:]
		end := bytes.IndexByte(rest, '\n')
		if end < 0 {
			end = len(rest)
		}
		pos += end + 1
		lineNo++
		return rest[:end]
	}
	for pos < len(data) && in.CPUs == nil {
		line := next()
		if skipSpace(line, 0) == len(line) {
			continue
		}
		cpus, err := parseHeader(string(line))
		if err != nil {
			return nil, err
		}
		in.CPUs = cpus
	}
	if in.CPUs == nil {
		return nil, ErrNoHeader
	}
	ncol := len(in.CPUs)
	// A row is 11 bytes a column plus the tail; guessing the row count up
	// front saves most of the slice growth.
	rows := len(data)/(11*ncol+48) + 1
	in.IRQs = make([]IRQ, 0, rows)
	counts := make([]uint64, 0, rows*ncol)
	var line []byte
	skip := func() { in.Skipped = append(in.Skipped, Line{Num: lineNo, Text: string(line)}) }
	for pos < len(data) {
		line = next()
		i := skipSpace(line, 0)
		if i == len(line) {
			continue
		}
		j := i
		num := 0
		for j < len(line) && isDigit(line[j]) && j-i < 9 {
			num = num*10 + int(line[j]-'0')
			j++
		}
		if j == i || j == len(line) || line[j] != ':' {
			if !archLine(line[i:]) {
				skip()
			}
			continue
		}
		k, ok := j+1, true
		for c := 0; c < ncol; c++ {
			for k < len(line) && isSpace(line[k]) {
				k++
			}
			start := k
			var v uint64
			for k < len(line) {
				d := line[k] - '0'
				if d > 9 {
					break
				}
				if v >= maxUint64Div10 && (v > maxUint64Div10 || d > maxUint64Mod10) {
					ok = false // overflows uint64
					break
				}
				v = v*10 + uint64(d)
				k++
			}
			if !ok || k == start || k < len(line) && !isSpace(line[k]) {
				ok = false
				break
			}
			counts = append(counts, v)
		}
		if !ok {
			counts = counts[:len(in.IRQs)*ncol]
			skip()
			continue
		}
		q, ok := splitTail(string(line[k:]))
		if !ok {
			counts = counts[:len(in.IRQs)*ncol]
			skip()
			continue
		}
		q.Number = num
		in.IRQs = append(in.IRQs, q)
	}
	for i := range in.IRQs {
		in.IRQs[i].Counts = counts[i*ncol : (i+1)*ncol : (i+1)*ncol]
	}
	return in, nil
}

const (
	maxUint64Div10 = (1<<64 - 1) / 10
	maxUint64Mod10 = (1<<64 - 1) % 10
)

// parseHeader parses "           CPU0       CPU1 ...".
func parseHeader(line string) ([]int, error) {
	var cpus []int
	for k := skipSpace(line, 0); k < len(line); k = skipSpace(line, k) {
		e := k
		for e < len(line) && !isSpace(line[e]) {
			e++
		}
		tok := line[k:e]
		if len(tok) < 4 || tok[:3] != "CPU" {
			return nil, fmt.Errorf("%w: %q is not a CPU column", ErrNoHeader, tok)
		}
		n, err := strconv.Atoi(tok[3:])
		if err != nil || n < 0 || n >= 1<<16 || !isDigit(tok[3]) {
			return nil, fmt.Errorf("%w: bad CPU column %q", ErrNoHeader, tok)
		}
		if len(cpus) > 0 && n <= cpus[len(cpus)-1] {
			return nil, fmt.Errorf("%w: CPU columns out of order at %q", ErrNoHeader, tok)
		}
		cpus = append(cpus, n)
		k = e
	}
	if len(cpus) == 0 {
		return nil, ErrNoHeader
	}
	return cpus, nil
}

// splitTail splits what follows the counts into the chip, hwirq, trigger,
// flow and action columns. The kernel prints (kernel/irq/proc.c) the chip
// name as " %8s" (or the chip's own print, or "None"), then the hwirq
// " %*lu" when the IRQ has a domain, then " %-8s" Edge/Level where the
// architecture shows it, then "-%-8s" the flow name when there is one,
// then "  %s" the actions joined by ", ".
//
// The chip name may hold single spaces ("Hyper-V PCIe MSI", "BRCM STB PCIe
// MSI") but never a wider gap, so the hwirq/flow columns are looked for at
// each word after the chip's first up to the first word after a gap of two
// or more spaces. Where none is found (3.10 glued the flow into the chip,
// "PCI-MSI-edge"; "XT-PIC-XT" prints none) the chip ends at that gap. What
// follows the hwirq/flow columns is the action list, whose names may hold
// spaces ("hfi1_0 sdma0", "iwlwifi: queue 1").
func splitTail(t string) (q IRQ, ok bool) {
	s := skipSpace(t, 0)
	if s == len(t) {
		return q, false // cut off after the counts
	}
	chipEnd := tokenEnd(t, s)
	if allDigits(t[s:chipEnd]) {
		return q, false // more counts than header columns
	}
	rest := chipEnd
	for {
		next := skipSpace(t, chipEnd)
		if next == len(t) {
			rest = next
			break
		}
		if end, ok := hwColumns(t, next, &q); ok {
			rest = end
			break
		}
		if next-chipEnd > 1 {
			rest = next // past the chip, and no hwirq/flow columns
			break
		}
		chipEnd = tokenEnd(t, next)
	}
	q.Chip = t[s:chipEnd]
	q.Name = trimRightSpace(t[skipSpace(t, rest):])
	return q, true
}

// hwColumns reads the hwirq, trigger and flow columns starting at word i, in
// the kernel's order, each optional: "524288", "1-edge" (hwirq and flow
// glued), "65536 Edge", "27 Level", "-msi-x", "Edge    -event",
// "1-ioapic-edge". It reports the end of the last one, and false (q
// untouched) when word i is none of them.
func hwColumns(t string, i int, q *IRQ) (end int, ok bool) {
	var hw, trig, flow string
	end = i
	tok := t[i:tokenEnd(t, i)]
	if n := digitPrefix(tok); n > 0 {
		if n < len(tok) && (tok[n] != '-' || n+1 == len(tok)) {
			return i, false // "0000:01:00.0", "8250x": a name, not a hwirq
		}
		hw, flow = tok[:n], tok[min(n+1, len(tok)):]
		end, tok = nextWord(t, i)
		if flow != "" {
			q.HWIRQ, q.Flow = hw, flow
			return end, true
		}
	}
	if tok == "Edge" || tok == "Level" {
		trig = tok
		end, tok = nextWord(t, end)
	}
	if len(tok) > 1 && tok[0] == '-' {
		flow = tok[1:]
		end, _ = nextWord(t, end)
	}
	if end == i {
		return i, false
	}
	q.HWIRQ, q.Trigger, q.Flow = hw, trig, flow
	return end, true
}

// nextWord returns the end of the word starting at i (after any space) and
// the word that follows it, empty at the end of the line. The end returned
// is that of the word at i, so a caller that does not take the following
// word stops before it.
func nextWord(t string, i int) (end int, following string) {
	i = skipSpace(t, i)
	end = tokenEnd(t, i)
	j := skipSpace(t, end)
	return end, t[j:tokenEnd(t, j)]
}

func digitPrefix(s string) int {
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	return n
}

func trimRightSpace(s string) string {
	end := len(s)
	for end > 0 && isSpace(s[end-1]) {
		end--
	}
	return s[:end]
}

// archLine reports whether a line is one of the architecture's summary rows
// ("NMI:", "LOC:", "ERR:", "MIS:", "IPI0:"): a short word before a colon.
func archLine[T ~string | ~[]byte](line T) bool {
	for i := 0; i < len(line) && i < 16; i++ {
		c := line[i]
		switch {
		case c == ':':
			return i > 0
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', isDigit(c), c == '_':
		default:
			return false
		}
	}
	return false
}

func tokenEnd(s string, i int) int {
	for i < len(s) && !isSpace(s[i]) {
		i++
	}
	return i
}

func skipSpace[T ~string | ~[]byte](s T, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }
