// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package expo

import (
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// Reject is why a sample was left out of an exposition: each is a
// collector's bug that client_golang's registry refuses too. The registry
// fails the whole scrape on one (promhttp's default, HTTPErrorOnError),
// or with ContinueOnError (the exporter's protobuf debugging formats)
// leaves the sample out and logs every scrape; expo leaves the sample
// out, keeps the rest of the scrape, counts it under its reason
// (Rejected) and has it logged once (Unreported). So the exposition is
// what promhttp with ContinueOnError writes, byte for byte, but for one
// case: a Desc with the family's name and help but other label names,
// which the registry takes and expo refuses (TypeClash), as it writes a
// family with one Desc's labels.
type Reject uint8

const (
	// LabelCount: more or fewer label values than the Desc has labels.
	LabelCount Reject = iota
	// InvalidUTF8: a label value that is not UTF-8 (left out when its
	// family is written, not by Group).
	InvalidUTF8
	// TypeClash: a sample of another type than its family's first (a
	// counter under a gauge), or of another Desc of the same name with
	// other help or labels.
	TypeClash
	// Duplicate: the label values of an earlier sample of the family
	// (the first is kept, as the registry keeps it).
	Duplicate
	rejects
)

// String is the reason label's value.
func (r Reject) String() string {
	switch r {
	case LabelCount:
		return "label_count"
	case InvalidUTF8:
		return "invalid_utf8"
	case TypeClash:
		return "type_clash"
	case Duplicate:
		return "duplicate"
	}
	return "unknown"
}

// Rejects lists every reason, for exporting each counter (zero included).
func Rejects() []Reject { return []Reject{LabelCount, InvalidUTF8, TypeClash, Duplicate} }

// rejected counts the samples left out since the process started, by
// reason: every write of an exposition that leaves one out counts it.
// firstReject is each reason's first sample, for Unreported; reported
// says it was handed out.
var (
	rejected    [rejects]atomic.Uint64
	firstReject [rejects]atomic.Pointer[string]
	reported    [rejects]atomic.Bool
)

// Rejected returns how many samples were left out for reason r.
func Rejected(r Reject) uint64 {
	if r >= rejects {
		return 0
	}
	return rejected[r].Load()
}

// Rejection is a reason's first rejected sample: its name and label
// values, for the log.
type Rejection struct {
	Reason Reject
	Sample string
}

// Unreported returns the reasons met since the last call for the first
// time, each with its first sample, so that the caller logs each reason
// once however many scrapes meet it. Once the four are reported, a call
// costs four atomic loads.
func Unreported() []Rejection {
	var out []Rejection
	for r := range rejects {
		if reported[r].Load() {
			continue
		}
		if p := firstReject[r].Load(); p != nil && reported[r].CompareAndSwap(false, true) {
			out = append(out, Rejection{Reason: r, Sample: *p})
		}
	}
	return out
}

// reject counts s as left out for reason r and keeps the reason's first
// sample (formatted only then).
func reject(r Reject, s *Sample) {
	rejected[r].Add(1)
	if firstReject[r].Load() == nil {
		d := s.describe()
		firstReject[r].CompareAndSwap(nil, &d)
	}
}

// describe is the sample's name, type and label values, quoted (a value
// that is not UTF-8 shows its bytes).
func (s *Sample) describe() string {
	var b strings.Builder
	b.WriteString(s.desc.Name)
	b.WriteString(" (")
	b.WriteString(strings.ToLower(s.typ.String()))
	b.WriteString(", labels ")
	b.WriteString(strconv.Quote(strings.Join(s.desc.Labels, ",")))
	b.WriteString(") values")
	for _, v := range s.labels {
		b.WriteByte(' ')
		b.WriteString(strconv.Quote(v))
	}
	return b.String()
}

// validLabels reports whether every label value is UTF-8.
func validLabels(values []string) bool {
	for _, v := range values {
		if !utf8.ValidString(v) {
			return false
		}
	}
	return true
}
