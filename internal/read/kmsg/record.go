// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package kmsg

import (
	"bytes"
	"errors"
	"strconv"
)

// Record is one /dev/kmsg record (Documentation/ABI/testing/dev-kmsg):
//
//	prio,seq,usec,flags[,...];message\n
//	 KEY=value\n
//
// the header line, then the dictionary as continuation lines that begin
// with a space (SUBSYSTEM=pci, DEVICE=+pci:0000:01:00.0 from
// dev_printk). Message is the text as the kernel escaped it
// (non-printable bytes as \xNN).
type Record struct {
	// Facility and Level are prio split: facility 0 is the kernel, 1 a
	// user-space write to /dev/kmsg.
	Facility, Level int
	Seq             uint64
	// Usec is the time since boot, in microseconds.
	Usec uint64
	// Cont is the historical continuation flag ('c').
	Cont bool
	// Message aliases the buffer the record was parsed from.
	Message []byte
	// Device is the dictionary's DEVICE value ("+pci:0000:01:00.0",
	// "+infiniband:mlx5_0", "n3"), empty without one.
	Device []byte
}

// errBadRecord is a record whose header does not parse.
var errBadRecord = errors.New("not a /dev/kmsg record")

// ParseRecord parses one record: its header line and any continuation
// lines after it. It keeps no reference to b beyond the returned slices.
func ParseRecord(b []byte) (Record, error) {
	var r Record
	line, rest, _ := bytes.Cut(b, []byte{'\n'})
	head, msg, ok := bytes.Cut(line, []byte{';'})
	if !ok {
		return r, errBadRecord
	}
	fields := bytes.Split(head, []byte{','})
	if len(fields) < 4 {
		return r, errBadRecord
	}
	prio, err := strconv.ParseUint(string(fields[0]), 10, 32)
	if err != nil {
		return r, errBadRecord
	}
	if r.Seq, err = strconv.ParseUint(string(fields[1]), 10, 64); err != nil {
		return r, errBadRecord
	}
	if r.Usec, err = strconv.ParseUint(string(fields[2]), 10, 64); err != nil {
		return r, errBadRecord
	}
	r.Facility, r.Level = int(prio>>3), int(prio&7)
	r.Cont = len(fields[3]) > 0 && fields[3][0] == 'c'
	r.Message = msg
	for len(rest) > 0 {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte{'\n'})
		if len(l) == 0 || l[0] != ' ' {
			break
		}
		if v, ok := bytes.CutPrefix(l[1:], []byte("DEVICE=")); ok {
			r.Device = v
		}
	}
	return r, nil
}
