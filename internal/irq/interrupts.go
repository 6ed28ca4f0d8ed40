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
	// Chip is the irq-chip column: "PCI-MSI-edge" (3.10, trigger
	// included), "IR-PCI-MSI", "IR-PCI-MSIX-0000:01:00.0" (6.2+ per-device
	// MSI domains), "ITS-MSI".
	Chip string
	// HWIRQ is the hwirq and trigger columns as printed ("1-edge",
	// "524288-edge", "65536 Edge"); empty on kernels that print none.
	HWIRQ string
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
// counts of every IRQ are a window of one shared slice and the chip, hwirq
// and name columns are substrings of one string made from the line's tail,
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
		chip, hw, name, ok := splitTail(string(line[k:]))
		if !ok {
			counts = counts[:len(in.IRQs)*ncol]
			skip()
			continue
		}
		in.IRQs = append(in.IRQs, IRQ{Number: num, Chip: chip, HWIRQ: hw, Name: name})
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

// splitTail splits what follows the counts into the chip column, the
// hwirq/trigger columns and the action names. The chip is always printed
// (" %8s", "None" without a chip); the hwirq is a number, optionally with
// the flow name glued on ("1-edge"), or a bare "-edge"; arm prints "Edge" or
// "Level" on its own; everything after that is the action list, whose names
// may contain spaces ("hfi1_0 sdma0").
func splitTail(t string) (chip, hw, name string, ok bool) {
	s := skipSpace(t, 0)
	if s == len(t) {
		return "", "", "", false // cut off after the counts
	}
	e := tokenEnd(t, s)
	chip = t[s:e]
	if allDigits(chip) {
		return "", "", "", false // more counts than header columns
	}
	hwStart, hwEnd := -1, -1
	for k := skipSpace(t, e); k < len(t); k = skipSpace(t, e) {
		e = tokenEnd(t, k)
		if !hwToken(t[k:e]) {
			end := len(t)
			for end > k && isSpace(t[end-1]) {
				end--
			}
			name = t[k:end]
			break
		}
		if hwStart < 0 {
			hwStart = k
		}
		hwEnd = e
	}
	if hwStart >= 0 {
		hw = t[hwStart:hwEnd]
	}
	return chip, hw, name, true
}

func hwToken(tok string) bool {
	if tok == "Edge" || tok == "Level" || tok[0] == '-' {
		return true
	}
	i := 0
	for i < len(tok) && isDigit(tok[i]) {
		i++
	}
	return i > 0 && (i == len(tok) || tok[i] == '-')
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
