// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package irq reads where an RDMA device's interrupts go: the one parser for
// /proc/interrupts, the mapping of IRQs to devices by PCI address, each
// IRQ's allowed and effective CPUs from /proc/irq/N/, and whether irqbalance
// runs. The collectors and the placement checks share its typed snapshot.
package irq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// Interrupts is a parsed /proc/interrupts, or the part of it a Scanner
// kept.
type Interrupts struct {
	// CPUs are the CPU numbers of the count columns, from the header. The
	// kernel prints a column per online CPU only, so a hot-unplugged CPU
	// leaves a gap ("CPU0 CPU1 CPU3").
	CPUs []int
	// IRQs are the numbered lines kept, in file order: every one from
	// ParseInterrupts, those the Scanner's Keep accepts otherwise.
	// Architecture lines (NMI, LOC, ERR, IPI0, ...) are never kept.
	IRQs []IRQ
	// Rows counts the numbered lines parsed, kept or not.
	Rows int
	// Skipped are the first MaxSkippedKept lines that were neither a
	// numbered IRQ nor an architecture line, or were cut short (a torn
	// read, a header that disagrees with the rows), in file order, each
	// cut to MaxSkippedText bytes; NumSkipped counts them all.
	Skipped    []Line
	NumSkipped int
}

// Bounds on what a parse keeps of the lines it skips: enough to name them
// in an error, not a copy of a garbage file.
const (
	MaxSkippedKept = 16
	MaxSkippedText = 256
)

// Line is a line of the file: its 1-based number and its text.
type Line struct {
	Num  int
	Text string
}

// IRQ is one numbered line.
type IRQ struct {
	Number int
	// Total is the sum of the per-CPU counts.
	Total uint64
	// Counts holds one count per column of Interrupts.CPUs; nil when the
	// Scanner kept totals only (Read does: placement needs no more).
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

// ErrNoHeader means the text does not start with the "CPU0 CPU1 ..." header,
// without which the count columns cannot be matched to CPUs.
var ErrNoHeader = errors.New("no CPU header line")

// ParseInterrupts parses a whole /proc/interrupts held in memory and keeps
// every IRQ with its per-CPU counts (tests, tools). The host is read with
// ReadInterrupts, which streams the file and keeps only what its Scanner
// asks for. Both feed the same Scanner a line at a time.
func ParseInterrupts(data []byte) (*Interrupts, error) {
	s := &Scanner{Counts: true, sizeHint: len(data)}
	for pos, num := 0, 1; pos < len(data); num++ {
		rest := data[pos:]
		end := bytes.IndexByte(rest, '\n')
		if end < 0 {
			end = len(rest)
		}
		pos += end + 1
		if err := s.Line(num, rest[:end]); err != nil {
			return nil, err
		}
	}
	return s.Result()
}

// ReadInterrupts streams proc's "interrupts" through s, one line at a
// time in bounded memory (hostfs.ReadLines): a 512-CPU, 4,096-IRQ host
// prints 23 MB, of which placement keeps a few hundred IRQs' totals and
// names. A read error is returned as hostfs gives it; a parse error says
// "parse interrupts".
func ReadInterrupts(ctx context.Context, proc hostfs.FS, s *Scanner) (*Interrupts, error) {
	err := hostfs.ReadLines(ctx, proc, "interrupts", s.Line)
	if s.err != nil {
		return nil, fmt.Errorf("parse interrupts: %w", s.err)
	}
	if err != nil {
		return nil, err
	}
	in, err := s.Result()
	if err != nil {
		return nil, fmt.Errorf("parse interrupts: %w", err)
	}
	return in, nil
}

// Scanner parses /proc/interrupts a line at a time (Line, then Result),
// keeping what its fields ask for. Each line's fields are read in one
// pass over its bytes; a kept IRQ costs one allocation (the string that
// holds its chip, hwirq, trigger, flow and name columns), and its counts,
// when kept, are a window of one shared slice, so the result does not pin
// the file. Use a Scanner once.
//
// The counts are read by the header's column count and the name is what
// follows the chip and hwirq/trigger columns, which is what stays stable
// across kernels and architectures (see research/sysfs.md §7). A line that
// does not fit is skipped and recorded, never guessed at.
type Scanner struct {
	// Keep, when set, is asked about each numbered line once parsed
	// (Counts not yet set); only the IRQs it accepts are kept. Nil keeps
	// every one.
	Keep func(q *IRQ) bool
	// Skip, when set, is called with each skipped line: its number and
	// text, valid only during the call.
	Skip func(num int, text []byte)
	// Counts keeps each kept IRQ's per-CPU counts; without it only their
	// Total is kept.
	Counts bool

	in       Interrupts
	header   bool
	counts   []uint64 // the kept counts, Counts only
	scratch  []uint64 // one line's counts, without Counts
	sizeHint int      // the file's size, when known up front
	err      error    // the header's error, which ends the parse
}

// Line parses one line of the file, without its newline; num is its
// 1-based number. It returns an error only for a bad header, after which
// the file cannot be read.
func (s *Scanner) Line(num int, line []byte) error {
	if s.err != nil {
		return s.err
	}
	i := skipSpace(line, 0)
	if i == len(line) {
		return nil
	}
	if !s.header {
		cpus, err := parseHeader(string(line))
		if err != nil {
			s.err = err
			return err
		}
		s.in.CPUs, s.header = cpus, true
		if s.Counts && s.sizeHint > 0 {
			// A row is 11 bytes a column plus the tail; guessing the
			// row count up front saves most of the slice growth.
			rows := s.sizeHint/(11*len(cpus)+48) + 1
			s.in.IRQs = make([]IRQ, 0, rows)
			s.counts = make([]uint64, 0, rows*len(cpus))
		}
		return nil
	}
	j := i
	n := 0
	for j < len(line) && isDigit(line[j]) && j-i < 9 {
		n = n*10 + int(line[j]-'0')
		j++
	}
	if j == i || j == len(line) || line[j] != ':' {
		if !archLine(line[i:]) {
			s.skip(num, line)
		}
		return nil
	}
	dst := s.scratch[:0]
	if s.Counts {
		dst = s.counts
	}
	mark := len(dst)
	dst, k, total, ok := parseCounts(dst, line, j+1, len(s.in.CPUs))
	var q IRQ
	if ok {
		q, ok = splitTail(string(line[k:]))
	}
	if !ok {
		if s.Counts {
			s.counts = dst[:mark]
		}
		s.skip(num, line)
		return nil
	}
	s.in.Rows++
	q.Number, q.Total = n, total
	// Asked about the slice's own element: a pointer to q would move q
	// to the heap, one more allocation per line.
	s.in.IRQs = append(s.in.IRQs, q)
	last := len(s.in.IRQs) - 1
	keep := s.Keep == nil || s.Keep(&s.in.IRQs[last])
	if !keep {
		s.in.IRQs[last] = IRQ{}
		s.in.IRQs = s.in.IRQs[:last]
	}
	switch {
	case s.Counts && keep:
		s.counts = dst
	case s.Counts:
		s.counts = dst[:mark]
	default:
		s.scratch = dst
	}
	return nil
}

// parseCounts appends the ncol counts that follow position k of line to
// dst, and returns where they end and their sum; ok is false when the line
// holds fewer, a count is not a number or the sum overflows.
func parseCounts(dst []uint64, line []byte, k, ncol int) (_ []uint64, end int, total uint64, ok bool) {
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
				return dst, k, 0, false // overflows uint64
			}
			v = v*10 + uint64(d)
			k++
		}
		if k == start || k < len(line) && !isSpace(line[k]) {
			return dst, k, 0, false
		}
		if total+v < total {
			return dst, k, 0, false // a sum that wraps would pass for a count
		}
		total += v
		dst = append(dst, v)
	}
	return dst, k, total, true
}

// skip records a skipped line: counted always, kept while few.
func (s *Scanner) skip(num int, line []byte) {
	s.in.NumSkipped++
	if s.Skip != nil {
		s.Skip(num, line)
	}
	if len(s.in.Skipped) < MaxSkippedKept {
		s.in.Skipped = append(s.in.Skipped, Line{Num: num, Text: string(line[:min(len(line), MaxSkippedText)])})
	}
}

// Result returns what the lines gave: ErrNoHeader when none was a header.
func (s *Scanner) Result() (*Interrupts, error) {
	if s.err != nil {
		return nil, s.err
	}
	if !s.header {
		return nil, ErrNoHeader
	}
	in := s.in
	if s.Counts {
		ncol := len(in.CPUs)
		for i := range in.IRQs {
			in.IRQs[i].Counts = s.counts[i*ncol : (i+1)*ncol : (i+1)*ncol]
		}
	}
	return &in, nil
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
