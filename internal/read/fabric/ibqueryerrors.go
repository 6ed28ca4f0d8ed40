// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// This file parses ibqueryerrors (infiniband-diags) output: one process
// reads every node's PMA counters, where perfquery takes one process per
// node. Two runs make a sweep:
//
//   - errors, with a threshold file of zeros: "GUID 0x… port N: [Field ==
//     V]" for every port with a non-zero error counter or PortXmitWait,
//     and nothing for a clean port. A switch whose PMA supports
//     AllPortSelect is asked once for all its ports and only its ports with
//     errors are asked one by one, so a clean switch costs one or two MADs.
//     A value printed with a human-readable figure after it ("[Field == V
//     (x.xxx)]") was read from the 64-bit PortCountersExtended field
//     (CapabilityMask2 IsAdditionalPortCountersExtendedSupported), a bare
//     one from PortCounters' fixed-width field.
//   - --counters: "GUID 0x<node GUID> port N: [PortXmitData == V (…)] …" for
//     every port, from PortCountersExtended where the PMA advertises it
//     (with the unicast and multicast packet counters when it advertises
//     the full attribute), PortCounters' 32-bit fields otherwise.
//
// A failed MAD is a libibmad warning on standard error naming the node's
// LID and the port ("… query failed on NAME, Lid 22 port 3"; port 0 for the
// ClassPortInfo query, 255 for the all-port one); the run goes on and exits
// 1, as it does when it finds errors. Only the closing "## Summary" says
// the run reached its end.

// maxIQELine bounds one output line: ibqueryerrors builds each in a 2 KiB
// buffer.
const maxIQELine = 8 << 10

// ErrUnparsable is output a parser gave up on (a line past its bound):
// Classify makes it ReasonUnparsable. The forwarding-table reader
// (internal/read/fabric/routes) wraps it too, so one classification serves
// every tool the fabric runs.
var ErrUnparsable = errors.New("reading the tool's output")

// iqeLine is one port line.
type iqeLine struct {
	guid uint64
	port int
	// all is a "port ALL" line (AllPortSelect sums), which the sweep
	// does not use.
	all    bool
	values [NumCounters]uint64
	seen   [NumCounters]bool
	// wide marks a value printed with a human-readable figure: 64 bits.
	wide [NumCounters]bool
	// fields counts the bracketed fields, ours or not: 8 on a data line
	// from the full PortCountersExtended.
	fields    int
	malformed bool
}

// iqeSummary is the closing summary.
type iqeSummary struct {
	seen        bool
	nodes       int
	ports       int
	pmaFailures int
	thresholds  string
}

// parseIBQueryErrors reads ibqueryerrors output and calls got for each port
// line. Memory stays bounded by one line whatever the output. Lines in
// none of its formats are counted in junk.
func parseIBQueryErrors(r io.Reader, got func(*iqeLine)) (sum iqeSummary, junk int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxIQELine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		switch {
		case len(line) == 0:
		case bytes.HasPrefix(line, []byte("GUID ")):
			l, ok := parseIQELine(line)
			if !ok {
				junk++
				continue
			}
			got(l)
		case bytes.HasPrefix(line, []byte("Errors for ")), bytes.HasPrefix(line, []byte("Data Counters for ")),
			bytes.HasPrefix(line, []byte("Link info:")):
		case bytes.HasPrefix(line, []byte("##")):
			parseIQESummary(bytes.TrimSpace(line[2:]), &sum)
		default:
			junk++
		}
	}
	if err := sc.Err(); err != nil {
		return sum, junk, fmt.Errorf("%w: %w", ErrUnparsable, err)
	}
	return sum, junk, nil
}

// parseIQESummary reads one "##" line into sum.
func parseIQESummary(l []byte, sum *iqeSummary) {
	s := string(l)
	var a, b int
	switch {
	case bytes.HasPrefix(l, []byte("Summary:")):
		if n, _ := fmt.Sscanf(s, "Summary: %d nodes checked, %d bad nodes found", &a, &b); n == 2 {
			sum.seen, sum.nodes = true, a
		}
	case bytes.HasSuffix(l, []byte("PMA query failures")):
		if n, _ := fmt.Sscanf(s, "%d PMA query failures", &a); n == 1 {
			sum.pmaFailures = a
		}
	case bytes.Contains(l, []byte("ports checked")):
		if n, _ := fmt.Sscanf(s, "%d ports checked", &a); n == 1 {
			sum.ports = a
		}
	case bytes.HasPrefix(l, []byte("Thresholds:")):
		sum.thresholds = string(bytes.TrimSpace(l[len("Thresholds:"):]))
	}
}

// parseIQELine parses "GUID 0x… port N: [F == V] [F == V (h)] …".
func parseIQELine(line []byte) (*iqeLine, bool) {
	rest := line[len("GUID "):]
	sp := bytes.IndexByte(rest, ' ')
	if sp < 0 {
		return nil, false
	}
	guid, err := strconv.ParseUint(string(bytes.TrimPrefix(rest[:sp], []byte("0x"))), 16, 64)
	if err != nil || !bytes.HasPrefix(rest[:sp], []byte("0x")) {
		return nil, false
	}
	rest = rest[sp+1:]
	if !bytes.HasPrefix(rest, []byte("port ")) {
		return nil, false
	}
	rest = rest[len("port "):]
	colon := bytes.IndexByte(rest, ':')
	if colon < 0 {
		return nil, false
	}
	l := &iqeLine{guid: guid}
	if p := string(rest[:colon]); p == "ALL" {
		l.all = true
	} else if l.port, err = strconv.Atoi(p); err != nil || l.port < 0 || l.port > 255 {
		return nil, false
	}
	rest = rest[colon+1:]
	for {
		open := bytes.IndexByte(rest, '[')
		if open < 0 {
			break
		}
		end := bytes.IndexByte(rest[open:], ']')
		if end < 0 {
			l.malformed = true
			break
		}
		field := rest[open+1 : open+end]
		rest = rest[open+end+1:]
		l.fields++
		name, val, ok := bytes.Cut(field, []byte(" == "))
		if !ok {
			l.malformed = true
			continue
		}
		id, ours := fieldIndex[string(name)]
		if !ours {
			continue
		}
		num, human, wide := bytes.Cut(val, []byte(" ("))
		v, err := strconv.ParseUint(string(num), 10, 64)
		if err != nil || wide && !bytes.HasSuffix(human, []byte(")")) {
			l.malformed = true
			continue
		}
		l.values[id], l.seen[id], l.wide[id] = v, true, wide
	}
	return l, true
}

// fixedBits is the width of counter id's field in PortCounters, where
// ibqueryerrors reads a value it prints bare (without the human-readable
// figure of a 64-bit one).
func fixedBits(id CounterID) uint8 {
	if id == TransmitWait {
		return 32 // PortCounters.PortXmitWait
	}
	return uint8(Counters[id].Spec.Bits)
}

// outOfWidth reports whether the line holds a bare error or PortXmitWait
// value wider than its field (70000 for a 16-bit counter): no PMA answers
// that, so the line is not a read of the port, and saturating it would
// export a guess as a real value.
func (l *iqeLine) outOfWidth() bool {
	for id := range NumCounters {
		bits := fixedBits(CounterID(id))
		if l.seen[id] && !l.wide[id] && judged(CounterID(id)) &&
			bits < 64 && l.values[id] > 1<<bits-1 {
			return true
		}
	}
	return false
}

// judged reports whether ibqueryerrors compares counter id with a
// threshold (and prints it only above): the error counters and
// PortXmitWait.
func judged(id CounterID) bool { return Counters[id].Error || id == TransmitWait }

// zeroThresholds checks the thresholds an errors run says it used (its
// summary's "Thresholds:" list, "[SymbolErrorCounter = 0][…]"): every one
// printed must be 0, and every judged counter printed. ibqueryerrors
// prints a line for each threshold line of the file it read, so a
// replaced file shows here whatever it holds; a counter the file does not
// name keeps a zero threshold, but then the file was not ours.
func zeroThresholds(list string) error {
	var seen [NumCounters]bool
	rest := strings.TrimSpace(list)
	for rest != "" {
		end := strings.IndexByte(rest, ']')
		if rest[0] != '[' || end < 0 {
			return fmt.Errorf("%q is not a threshold list", list)
		}
		name, val, ok := strings.Cut(rest[1:end], " = ")
		id, ours := fieldIndex[name]
		switch {
		case !ok:
			return fmt.Errorf("%q is not a threshold", rest[:end+1])
		case val != "0":
			return fmt.Errorf("the threshold of %s is %s, not 0", name, val)
		case ours:
			seen[id] = true
		}
		rest = strings.TrimSpace(rest[end+1:])
	}
	for id := range NumCounters {
		if judged(CounterID(id)) && !seen[id] {
			return fmt.Errorf("no threshold printed for %s (%q)", Counters[id].Field, list)
		}
	}
	return nil
}

// iqeFailure is one failed query ibqueryerrors reported on standard error.
type iqeFailure struct {
	lid, port int
	// node is true for a failure that leaves the whole node unread: its
	// ClassPortInfo (without it ibqueryerrors falls back to the 32-bit
	// counters, so nothing it reads of the node can be trusted) or its
	// all-port query (a failed one reads as "no errors").
	node bool
}

// parseIQEStderr returns the failed queries ibqueryerrors reported, the
// number of failure lines it could not attribute to a port, and the first
// other error line (the cache not loading, the local port not opening, a
// warning of a kind not known here), if any; cacheFailed is the fabric
// cache not loading (then it is discovered again).
func parseIQEStderr(stderr []byte) (fails []iqeFailure, unattributed int, fatal string, cacheFailed bool) {
	for raw := range bytes.SplitSeq(stderr, []byte("\n")) {
		l := bytes.TrimSpace(raw)
		if bytes.Contains(l, []byte(" query failed on ")) {
			f, ok := parseIQEFailure(l)
			if !ok {
				unattributed++
				continue
			}
			fails = append(fails, f)
			continue
		}
		if bytes.Contains(l, []byte("_do_madrpc failed")) {
			continue // the line after it names the query
		}
		if bytes.Contains(l, []byte("loading cached fabric failed")) {
			cacheFailed = true
		}
		if fatal == "" {
			fatal = ErrorLine(l) // "" for umad2sim's attach notice
		}
	}
	return fails, unattributed, fatal, cacheFailed
}

// parseIQEFailure reads "… query failed on NAME, Lid L port P". The node
// name comes from the fabric and may hold anything, so the LID and port
// are read from the end.
func parseIQEFailure(l []byte) (iqeFailure, bool) {
	i := bytes.LastIndex(l, []byte(", Lid "))
	if i < 0 {
		return iqeFailure{}, false
	}
	var f iqeFailure
	if n, _ := fmt.Sscanf(string(l[i+len(", Lid "):]), "%d port %d", &f.lid, &f.port); n != 2 || f.lid <= 0 {
		return iqeFailure{}, false
	}
	f.node = bytes.Contains(l, []byte("classportinfo")) || f.port == 255
	return f, true
}

// fieldIndex maps the tools' field names to counters.
var fieldIndex = func() map[string]CounterID {
	m := make(map[string]CounterID, NumCounters)
	for id, c := range Counters {
		m[c.Field] = CounterID(id)
	}
	return m
}()
