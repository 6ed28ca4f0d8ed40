// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package kmsg

import (
	"bytes"
	"fmt"
	"regexp"
)

// Subject is what a message is about, as the message names it: the PCI
// function (dev_printk's "mlx5_core 0000:5c:00.0:" prefix or the
// dictionary's DEVICE=+pci:), the netdev ("... 0000:13:00.1 eth1:" or
// the NETDEV WATCHDOG name), or the RDMA device ("infiniband mlx5_0:").
// The host maps it to an RDMA device; all empty is a message that names
// nothing.
type Subject struct {
	PCI, Netdev, IBDev string
}

// Matcher matches records against Events. It is immutable and safe for
// concurrent use.
type Matcher struct {
	// byDriver lists the events to try per first word; any lists those
	// for every driver ("*").
	byDriver map[string][]int
	any      []int
	patterns []*regexp.Regexp
	netdevIx []int // the netdev group's index in each pattern, -1 for none
	needles  [][]byte
}

// NewMatcher compiles events (Events in production).
func NewMatcher(events []Event) (*Matcher, error) {
	m := &Matcher{byDriver: map[string][]int{}, patterns: make([]*regexp.Regexp, len(events)),
		netdevIx: make([]int, len(events)), needles: make([][]byte, len(events))}
	for i, e := range events {
		if e.Name == "" || e.Needle == "" || len(e.Drivers) == 0 {
			return nil, fmt.Errorf("kmsg event %d (%q): name, needle and drivers are required", i, e.Name)
		}
		m.needles[i] = []byte(e.Needle)
		m.netdevIx[i] = -1
		if e.Pattern != "" {
			re, err := regexp.Compile(e.Pattern)
			if err != nil {
				return nil, fmt.Errorf("kmsg event %s: %w", e.Name, err)
			}
			m.patterns[i] = re
			m.netdevIx[i] = re.SubexpIndex("netdev")
		}
		for _, d := range e.Drivers {
			if d == "*" {
				m.any = append(m.any, i)
			} else {
				m.byDriver[d] = append(m.byDriver[d], i)
			}
		}
	}
	return m, nil
}

// Match returns the index in the events of the first one msg matches and
// the subject msg names, or -1. Most kernel lines are another driver's:
// they cost a map lookup of their first word and the needle searches of
// the any-driver events.
func (m *Matcher) Match(msg []byte) (int, Subject) {
	word := msg
	if i := bytes.IndexAny(msg, " :"); i >= 0 {
		word = msg[:i]
	}
	if ix := m.try(m.byDriver[string(word)], msg); ix >= 0 {
		return ix, m.subject(ix, msg)
	}
	if ix := m.try(m.any, msg); ix >= 0 {
		return ix, m.subject(ix, msg)
	}
	return -1, Subject{}
}

func (m *Matcher) try(cands []int, msg []byte) int {
	for _, i := range cands {
		if !bytes.Contains(msg, m.needles[i]) {
			continue
		}
		if re := m.patterns[i]; re != nil && !re.Match(msg) {
			continue
		}
		return i
	}
	return -1
}

// subject reads the subject from the dev_printk prefix ("driver BDF:" or
// "driver BDF netdev:"), else from the pattern's netdev group.
func (m *Matcher) subject(ix int, msg []byte) Subject {
	var s Subject
	_, rest, ok := bytes.Cut(msg, []byte{' '})
	if ok {
		if n := pciLen(rest); n > 0 {
			s.PCI = string(rest[:n])
			if rest[n] == ' ' {
				if end := bytes.IndexByte(rest[n+1:], ':'); end > 0 && bytes.IndexByte(rest[n+1:n+1+end], ' ') < 0 {
					s.Netdev = string(rest[n+1 : n+1+end])
				}
			}
			return s
		}
		if name, ok := bytes.CutPrefix(msg, []byte("infiniband ")); ok {
			if end := bytes.IndexByte(name, ':'); end > 0 {
				s.IBDev = string(name[:end])
				return s
			}
		}
	}
	if g := m.netdevIx[ix]; g >= 0 {
		if sm := m.patterns[ix].FindSubmatch(msg); sm != nil {
			s.Netdev = string(sm[g])
		}
	}
	return s
}

// pciLen is the length of the PCI address at the start of b
// ("0000:5c:00.0"), followed by ':' or ' ', or 0.
func pciLen(b []byte) int {
	const n = len("0000:00:00.0")
	if len(b) <= n || (b[n] != ':' && b[n] != ' ') || !validPCI(b[:n]) {
		return 0
	}
	return n
}

// validPCI reports whether b is a PCI address: domain:bus:device.function
// in lower-case hex, as sysfs and dev_printk write it.
func validPCI(b []byte) bool {
	if len(b) != len("0000:00:00.0") {
		return false
	}
	for i, c := range b {
		switch i {
		case 4, 7:
			if c != ':' {
				return false
			}
		case 10:
			if c != '.' {
				return false
			}
		case 11:
			if c < '0' || c > '7' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// dictSubject refines s with the record's DEVICE dictionary value, which
// the kernel sets from the struct device itself and so is exact.
func dictSubject(s Subject, device []byte) Subject {
	if v, ok := bytes.CutPrefix(device, []byte("+pci:")); ok && validPCI(v) {
		s.PCI = string(v)
	} else if v, ok := bytes.CutPrefix(device, []byte("+infiniband:")); ok && len(v) > 0 {
		s.IBDev = string(v)
	}
	return s
}
