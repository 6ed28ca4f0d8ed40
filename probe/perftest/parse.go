// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package perftest

import (
	"errors"
	"fmt"
	"math"
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Kind is the kind of result table a run printed.
type Kind int

// Result table kinds (research/perftest.md §1.3).
const (
	KindNone Kind = iota
	// KindBandwidth: #bytes #iterations BW peak BW average [MsgRate] [CPU_Util].
	KindBandwidth
	// KindLatency: #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
	// (older versions print a prefix of these columns).
	KindLatency
	// KindLatencyDuration: #bytes #iterations t_avg tps average (latency with -D).
	KindLatencyDuration
)

func (k Kind) String() string {
	switch k {
	case KindBandwidth:
		return "bandwidth"
	case KindLatency:
		return "latency"
	case KindLatencyDuration:
		return "latency-duration"
	}
	return "none"
}

// Report is one parsed perftest output. Values are in base units: bytes per
// second, seconds, messages per second.
type Report struct {
	// Title is the centred test title ("RDMA_Write BW Test").
	Title string
	Kind  Kind
	// Unit is the bandwidth unit as printed: "Gb/sec", "MiB/sec" or "MB/sec"
	// (MB meant 2^20 bytes before perftest 24.07 renamed it); "usec" for
	// latency.
	Unit string
	// Info holds the header's "Key : value" fields, first occurrence wins
	// ("Device", "Link type", "Number of qps", "Mtu", "GID index", ...).
	Info map[string]string
	// Local and Remote are the QP address lines, one per QP.
	Local, Remote []Address
	Bandwidth     []BandwidthRow
	Latency       []LatencyRow
	// Notes are the lines that are none of the above: warnings printed
	// before the header, stderr text interleaved into a merged stream,
	// shell prompts in recordings.
	Notes []string
	// Duplicates counts result rows seen more than once: a recording
	// where server and client output are interleaved prints each size
	// twice. The first occurrence is kept (an undamaged one over a
	// damaged one).
	Duplicates int
	// Damaged counts result rows in which two or more columns ran
	// together ("24.1225.67"). Such a row is kept with the run-together
	// columns absent (Has, PeakMeasured, HasMsgRate, HasCPU false) and a
	// note naming them; a bandwidth row whose average ran into another
	// column is not kept at all, since the average is all it is for.
	Damaged int
}

// Address is one "local address:" or "remote address:" line.
type Address struct {
	LID uint16
	QPN uint32
	// GID is the following "GID:" line, if any (perftest prints its 16
	// bytes as decimal numbers).
	GID net.IP
}

// BandwidthRow is one message size of a bandwidth table.
type BandwidthRow struct {
	Bytes      int64
	Iterations int64
	// PeakBytesPerSecond is 0 with PeakMeasured false when perftest did
	// not compute it (duration mode, -N, > 20000 iterations, send server).
	PeakBytesPerSecond float64
	PeakMeasured       bool
	AvgBytesPerSecond  float64
	// MessagesPerSecond is absent (HasMsgRate false) in OFED-1.x output.
	MessagesPerSecond float64
	HasMsgRate        bool
	// CPUUtil is the whole host's CPU use in percent (--cpu_util).
	CPUUtil float64
	HasCPU  bool
}

// LatencyRow is one message size of a latency table. Durations are in
// seconds. Has says which columns were printed.
type LatencyRow struct {
	Bytes      int64
	Iterations int64
	Min        float64
	Max        float64
	Typical    float64
	Avg        float64
	// Stdev is what perftest prints; it has been truncated to whole
	// microseconds before squaring since v4.5-0.17 and is mostly 0.00:
	// do not export it (research/perftest.md §1.5).
	Stdev float64
	P99   float64
	P999  float64
	// TPS is transactions per second, latency duration mode only.
	TPS float64
	Has Columns
	// Damaged are the columns that ran together with a neighbour and are
	// absent for that reason (not in Has).
	Damaged Columns
}

// Columns is a set of latency table columns.
type Columns uint16

// Latency columns.
const (
	ColMin Columns = 1 << iota
	ColMax
	ColTypical
	ColAvg
	ColStdev
	ColP99
	ColP999
	ColTPS
)

// ParseError says why stdout held no usable result.
type ParseError struct {
	Reason string
	Line   string
}

func (e *ParseError) Error() string {
	if e.Line == "" {
		return "perftest output: " + e.Reason
	}
	return fmt.Sprintf("perftest output: %s: %q", e.Reason, e.Line)
}

// column names in header order of appearance. Multi-word names are matched
// as substrings of the header line, so spacing and tabs do not matter.
type column int

const (
	cPeak column = iota
	cAvgBW
	cMsgRate
	cCPU
	cMin
	cMax
	cTypical
	cAvgLat
	cStdev
	cP99
	cP999
	cTPS
)

// columnNames are found by substring: they are literal, and a regexp per
// column costs more than the rest of the parse.
var columnNames = []struct {
	name string
	col  column
}{
	{"BW peak[", cPeak},
	{"BW average[", cAvgBW},
	{"MsgRate[", cMsgRate},
	{"CPU_Util[", cCPU},
	{"t_min[", cMin},
	{"t_max[", cMax},
	{"t_typical[", cTypical},
	{"t_avg[", cAvgLat},
	{"t_stdev[", cStdev},
	{"99% percentile[", cP99}, // not the tail of "99.9% percentile["
	{"99.9% percentile[", cP999},
	{"tps average", cTPS},
}

// columnAt is where name occurs in header, -1 if not; "99% percentile["
// must not be the end of "99.9% percentile[".
func columnAt(header, name string) int {
	from := 0
	for {
		i := strings.Index(header[from:], name)
		if i < 0 {
			return -1
		}
		i += from
		if name != "99% percentile[" || i == 0 || header[i-1] != '.' {
			return i
		}
		from = i + 1
	}
}

var (
	addrRe    = regexp.MustCompile(`^(local|remote) address:\s*LID\s+(0x[0-9A-Fa-f]+|[0-9]+),?\s+QPN\s+(0x[0-9A-Fa-f]+|[0-9]+)`)
	gidLineRe = regexp.MustCompile(`^GID:\s*([0-9]{1,3}(?::[0-9]{1,3}){15})\s*$`)
)

// table is the column layout of the last column header seen.
type table struct {
	kind  Kind
	cols  []column
	scale float64 // bandwidth unit in bytes per second
}

// Parse reads perftest's stdout. It accepts every layout in
// testdata/samples: one or two tests' output concatenated or interleaved
// line by line, header continuation lines, extra stderr lines anywhere,
// tabs and the 6-decimal small-bandwidth format. It fails when no result
// table with at least one row is present.
func Parse(stdout []byte) (*Report, error) {
	r := &Report{Info: map[string]string{}}
	var (
		tab      *table
		inHeader bool
		lastAddr *Address
		seenBW   = map[int64]rowAt{}
		seenLat  = map[int64]rowAt{}
	)
	for _, raw := range strings.Split(string(stdout), "\n") {
		line := strings.TrimSpace(strings.ReplaceAll(raw, "\r", ""))
		switch {
		case line == "":
			continue
		case isRule(line):
			lastAddr = nil
			continue
		case strings.HasPrefix(line, "#bytes"):
			t, err := parseColumns(line)
			if err != nil {
				return nil, err
			}
			if tab != nil && tab.kind != t.kind {
				return nil, &ParseError{Reason: "two different result tables", Line: line}
			}
			tab, inHeader = t, false
			if r.Kind == KindNone {
				r.Kind = t.kind
				r.Unit = unitOf(line)
			}
			continue
		case strings.HasSuffix(line, " Test") && !strings.Contains(line, ":"):
			if r.Title == "" {
				r.Title = line
			}
			inHeader = true
			continue
		}
		if m := matchAddr(line); m != nil {
			lid, _ := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(m[2]), "0x"), 16, 16)
			qpn, _ := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(m[3]), "0x"), 16, 32)
			a := Address{LID: uint16(lid), QPN: uint32(qpn)}
			if m[1] == "local" {
				r.Local = append(r.Local, a)
				lastAddr = &r.Local[len(r.Local)-1]
			} else {
				r.Remote = append(r.Remote, a)
				lastAddr = &r.Remote[len(r.Remote)-1]
			}
			continue
		}
		if m := matchGID(line); m != nil {
			if lastAddr != nil {
				lastAddr.GID = decimalGID(m[1])
			}
			continue
		}
		if tab != nil {
			if ok, err := r.addRow(tab, line, seenBW, seenLat); err != nil {
				return nil, err
			} else if ok {
				continue
			}
		}
		if inHeader && addPairs(r.Info, line) {
			continue
		}
		r.Notes = append(r.Notes, line)
	}
	if tab == nil {
		return r, &ParseError{Reason: "no result table (no #bytes header line)"}
	}
	if len(r.Bandwidth)+len(r.Latency) == 0 {
		return r, &ParseError{Reason: "result table has no rows"}
	}
	sort.SliceStable(r.Bandwidth, func(i, j int) bool { return r.Bandwidth[i].Bytes < r.Bandwidth[j].Bytes })
	sort.SliceStable(r.Latency, func(i, j int) bool { return r.Latency[i].Bytes < r.Latency[j].Bytes })
	return r, nil
}

// matchAddr and matchGID test a cheap prefix before the regexp: most lines
// are neither.
func matchAddr(line string) []string {
	if !strings.HasPrefix(line, "local address") && !strings.HasPrefix(line, "remote address") {
		return nil
	}
	return addrRe.FindStringSubmatch(line)
}

func matchGID(line string) []string {
	if !strings.HasPrefix(line, "GID:") {
		return nil
	}
	return gidLineRe.FindStringSubmatch(line)
}

// addPairs reads a header line of "Key : value" pairs, one or two per line
// separated by tabs or spaces ("Dual-port : OFF\t\tDevice : mlx5_0"; the
// key "rdma_cm QPs" has a tab inside). A value is one word. It adds the
// pairs not yet in info and reports whether the line was such a line.
func addPairs(info map[string]string, line string) bool {
	type pair struct{ k, v string }
	var buf [4]pair
	pairs := buf[:0]
	rest := line
	for {
		rest = strings.TrimLeft(rest, " \t")
		if rest == "" {
			break
		}
		colon := strings.IndexByte(rest, ':')
		if colon <= 0 {
			return false
		}
		key := strings.TrimSpace(rest[:colon])
		if strings.ContainsAny(key, "\t ") {
			// "rdma_cm QPs\t": one space between words, as printed.
			key = strings.Join(strings.Fields(key), " ")
		}
		if !validKey(key) {
			return false
		}
		rest = strings.TrimLeft(rest[colon+1:], " \t")
		end := strings.IndexAny(rest, " \t")
		if end < 0 {
			end = len(rest)
		}
		if end == 0 {
			return false
		}
		pairs = append(pairs, pair{key, rest[:end]})
		rest = rest[end:]
	}
	if len(pairs) == 0 {
		return false
	}
	for _, p := range pairs {
		if _, dup := info[p.k]; !dup {
			info[p.k] = p.v
		}
	}
	return true
}

// validKey: a letter, then letters, digits, spaces and _.*/- (the keys
// perftest prints: "ibv_wr* API", "Data ex. method", "Dual-port").
func validKey(k string) bool {
	for i, c := range k {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case i > 0 && (c >= '0' && c <= '9' || strings.ContainsRune(" _.*/-", c)):
		default:
			return false
		}
	}
	return k != ""
}

func isRule(line string) bool {
	return len(line) >= 10 && strings.Trim(line, "-") == "" ||
		// the server's "* Waiting for client to connect... *" banner
		len(line) >= 10 && strings.Trim(line, "*") == "" ||
		strings.HasPrefix(line, "* Waiting for client")
}

// unitOf is the unit in brackets after the first "BW peak", "BW average"
// or "t_..." column name.
func unitOf(header string) string {
	best := -1
	for _, name := range []string{"BW peak[", "BW average[", "t_"} {
		i := strings.Index(header, name)
		if name == "t_" {
			// t_min[, t_avg[, ...: the bracket follows the word.
			for i >= 0 {
				j := i + 2
				for j < len(header) && (header[j] >= 'a' && header[j] <= 'z') {
					j++
				}
				if j < len(header) && header[j] == '[' {
					break
				}
				k := strings.Index(header[i+2:], "t_")
				if k < 0 {
					i = -1
				} else {
					i += 2 + k
				}
			}
		}
		if i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	open := strings.IndexByte(header[best:], '[')
	if open < 0 {
		return ""
	}
	rest := header[best+open+1:]
	end := strings.IndexByte(rest, ']')
	if end <= 0 {
		return ""
	}
	return rest[:end]
}

func parseColumns(line string) (*table, error) {
	type found struct {
		at  int
		col column
	}
	var fs []found
	for _, c := range columnNames {
		if at := columnAt(line, c.name); at >= 0 {
			fs = append(fs, found{at, c.col})
		}
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].at < fs[j].at })
	t := &table{}
	for _, f := range fs {
		t.cols = append(t.cols, f.col)
	}
	has := func(c column) bool {
		for _, x := range t.cols {
			if x == c {
				return true
			}
		}
		return false
	}
	switch {
	case has(cAvgBW):
		t.kind = KindBandwidth
		switch unit := unitOf(line); unit {
		case "Gb/sec":
			t.scale = 1e9 / 8
		case "MiB/sec", "MB/sec":
			// perftest's MB has always been 2^20 bytes (24.07 only fixed
			// the label).
			t.scale = 1 << 20
		default:
			return nil, &ParseError{Reason: "unknown bandwidth unit " + strconv.Quote(unit), Line: line}
		}
	case has(cTPS):
		t.kind = KindLatencyDuration
	case has(cMin) || has(cAvgLat) || has(cTypical):
		t.kind = KindLatency
		if u := unitOf(line); u != "usec" {
			return nil, &ParseError{Reason: "latency unit " + strconv.Quote(u) + " (want usec; -C cycles are not supported)", Line: line}
		}
	default:
		return nil, &ParseError{Reason: "unknown result columns", Line: line}
	}
	return t, nil
}

// addRow parses line as a result row of t. It returns false (and no error)
// when the line is not a row at all.
func (r *Report) addRow(t *table, line string, seenBW, seenLat map[int64]rowAt) (bool, error) {
	f := strings.Fields(line)
	if len(f) < 2 || !allDigits(f[0]) || !allDigits(f[1]) {
		return false, nil
	}
	size, err1 := strconv.ParseInt(f[0], 10, 64)
	iters, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return false, nil
	}
	vals, damaged, ok := splitValues(f[2:], len(t.cols))
	if !ok {
		return false, nil
	}
	if damaged != nil {
		r.Damaged++
		var names []string
		for i, d := range damaged {
			if d {
				names = append(names, t.cols[i].String())
			}
		}
		note := "size " + strconv.FormatInt(size, 10) + ": columns " + strings.Join(names, ", ") +
			" ran together (no space between them); left out: " + line
		if t.kind == KindBandwidth && slices.Contains(names, cAvgBW.String()) {
			note = "size " + strconv.FormatInt(size, 10) + ": the BW average ran into another column (no space between them); row dropped: " + line
			r.Notes = append(r.Notes, note)
			return true, nil
		}
		r.Notes = append(r.Notes, note)
	}
	switch t.kind {
	case KindBandwidth:
		row := BandwidthRow{Bytes: size, Iterations: iters}
		for i, c := range t.cols {
			if damaged != nil && damaged[i] {
				continue // absent: PeakMeasured, HasMsgRate, HasCPU stay false
			}
			switch c {
			case cPeak:
				row.PeakBytesPerSecond, row.PeakMeasured = vals[i]*t.scale, vals[i] > 0
			case cAvgBW:
				row.AvgBytesPerSecond = vals[i] * t.scale
			case cMsgRate:
				row.MessagesPerSecond, row.HasMsgRate = vals[i]*1e6, true
			case cCPU:
				row.CPUUtil, row.HasCPU = vals[i], true
			}
		}
		r.Bandwidth = keepRow(r, r.Bandwidth, seenBW, size, row, damaged != nil, line)
	default:
		row := LatencyRow{Bytes: size, Iterations: iters}
		for i, c := range t.cols {
			if damaged != nil && damaged[i] {
				if bit, ok := latencyColumn[c]; ok {
					row.Damaged |= bit
					continue
				}
				return false, nil // a bandwidth column in a latency table
			}
			v := vals[i] * 1e-6
			switch c {
			case cMin:
				row.Min, row.Has = v, row.Has|ColMin
			case cMax:
				row.Max, row.Has = v, row.Has|ColMax
			case cTypical:
				row.Typical, row.Has = v, row.Has|ColTypical
			case cAvgLat:
				row.Avg, row.Has = v, row.Has|ColAvg
			case cStdev:
				row.Stdev, row.Has = v, row.Has|ColStdev
			case cP99:
				row.P99, row.Has = v, row.Has|ColP99
			case cP999:
				row.P999, row.Has = v, row.Has|ColP999
			case cTPS:
				row.TPS, row.Has = vals[i], row.Has|ColTPS
			default:
				return false, nil // a bandwidth column in a latency table
			}
		}
		r.Latency = keepRow(r, r.Latency, seenLat, size, row, damaged != nil, line)
	}
	return true, nil
}

// rowAt is where a size's row is kept, and whether that row is damaged.
type rowAt struct {
	i       int
	damaged bool
}

// keepRow appends a table row unless one of its size is there already
// (server and client output interleaved print each size twice): the
// repeat is counted, and noted when its numbers differ. An undamaged
// repeat replaces a damaged first row.
func keepRow[R comparable](r *Report, rows []R, seen map[int64]rowAt, size int64, row R, damaged bool, line string) []R {
	if at, dup := seen[size]; dup {
		r.Duplicates++
		switch {
		case at.damaged && !damaged:
			rows[at.i] = row
			seen[size] = rowAt{at.i, false}
		case !at.damaged && !damaged && rows[at.i] != row:
			r.Notes = append(r.Notes, "conflicting second row for size "+strconv.FormatInt(size, 10)+": "+line)
		}
		return rows
	}
	seen[size] = rowAt{len(rows), damaged}
	return append(rows, row)
}

// latencyColumn is the Columns bit of each latency table column.
var latencyColumn = map[column]Columns{
	cMin: ColMin, cMax: ColMax, cTypical: ColTypical, cAvgLat: ColAvg,
	cStdev: ColStdev, cP99: ColP99, cP999: ColP999, cTPS: ColTPS,
}

// String is the column's name as in the header, without the unit.
func (c column) String() string {
	for _, n := range columnNames {
		if n.col == c {
			return strings.TrimRight(n.name, "[")
		}
	}
	return "column " + strconv.Itoa(int(c))
}

// splitValues parses a row's value fields for n columns. When there are
// as many fields as columns each must be a number. When there are fewer,
// columns ran together: perftest prints every value column with a decimal
// point (%.2f, %.6f) and separates them with padding that a value as wide
// as its field leaves out (and a recording that drops tabs removes), so a
// field of k numbers run together has k dots and covers k columns. Those
// columns are marked damaged and left out: where one number ends inside
// "24.1225.67" is not printed, and guessing it from the usual precision
// would be a made-up value. The split is accepted only when the dots
// account for exactly n columns; damaged is nil for an undamaged row.
func splitValues(fields []string, n int) (vals []float64, damaged []bool, ok bool) {
	if len(fields) > n || len(fields) == 0 {
		return nil, nil, false
	}
	vals = make([]float64, n)
	if len(fields) == n {
		for i, s := range fields {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || !numeric(s) {
				return nil, nil, false
			}
			vals[i] = v
		}
		return vals, nil, true
	}
	damaged = make([]bool, n)
	col := 0
	for _, s := range fields {
		dots := strings.Count(s, ".")
		if dots == 0 || col+dots > n {
			return nil, nil, false
		}
		if dots == 1 {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || !numeric(s) {
				return nil, nil, false
			}
			vals[col] = v
			col++
			continue
		}
		if !runTogether(s) {
			return nil, nil, false
		}
		for k := 0; k < dots; k++ {
			damaged[col] = true
			col++
		}
	}
	if col != n {
		return nil, nil, false
	}
	return vals, damaged, true
}

// runTogether reports whether s is two or more perftest numbers with no
// space between them: digits and dots, a digit on both sides of every dot
// and at least one digit between two dots' fractions and the next integer
// part ("24.1225.67", not "24..12" or ".5.6").
func runTogether(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
		case c == '.':
			if s[i+1] == '.' {
				return false
			}
		default:
			return false
		}
	}
	// Between two dots there must be room for a fraction digit and an
	// integer digit.
	last := -1
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			if last >= 0 && i-last < 3 {
				return false
			}
			last = i
		}
	}
	return true
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// numeric accepts what perftest's %.2f / %.6f print: digits with one dot.
// strconv.ParseFloat would also take "inf", "0x1p3" or "1e5".
func numeric(s string) bool {
	dot := false
	for i, c := range s {
		switch {
		case c >= '0' && c <= '9':
		case c == '.' && !dot && i > 0:
			dot = true
		default:
			return false
		}
	}
	return s != ""
}

func decimalGID(s string) net.IP {
	parts := strings.Split(s, ":")
	ip := make(net.IP, 16)
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v > 255 {
			return nil
		}
		ip[i] = byte(v)
	}
	return ip
}

// Row returns the bandwidth row for size, or the largest size when size is
// 0 (an -a table's last row is the one that saturates the link).
func (r *Report) BandwidthRow(size int64) (BandwidthRow, bool) {
	if len(r.Bandwidth) == 0 {
		return BandwidthRow{}, false
	}
	if size == 0 {
		return r.Bandwidth[len(r.Bandwidth)-1], true
	}
	for _, row := range r.Bandwidth {
		if row.Bytes == size {
			return row, true
		}
	}
	return BandwidthRow{}, false
}

// LatencyRow returns the latency row for size, or the smallest size when
// size is 0 (latency is judged on small messages).
func (r *Report) LatencyRow(size int64) (LatencyRow, bool) {
	if len(r.Latency) == 0 {
		return LatencyRow{}, false
	}
	if size == 0 {
		return r.Latency[0], true
	}
	for _, row := range r.Latency {
		if row.Bytes == size {
			return row, true
		}
	}
	return LatencyRow{}, false
}

// versionRe matches "Version: 6.06", what -V prints (and exits 1).
var versionRe = regexp.MustCompile(`(?m)^\s*Version:\s*([0-9]+\.[0-9]+)\s*$`)

// ParseVersion reads the internal version number perftest -V prints. Both
// sides of a run must run compatible versions: 5.70 and later refuse older
// peers.
func ParseVersion(stdout []byte) (string, error) {
	m := versionRe.FindSubmatch(stdout)
	if m == nil {
		return "", errors.New("perftest -V: no \"Version: N.NN\" line")
	}
	return string(m[1]), nil
}
