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

// Matcher matches records against Rules. It is immutable and safe for
// concurrent use.
type Matcher struct {
	// byDriver lists the rules to try per first word; any lists those
	// for every driver ("*").
	byDriver map[string][]int
	any      []int
	patterns []*regexp.Regexp
	netdevIx []int // the netdev group's index in each pattern, -1 for none
	needles  [][]byte
	event    []int // each entry's index in the events
	family   []Family
	rule     []int // each entry's index in the rules
}

// NewMatcher compiles rules over events (Rules and Events in production).
func NewMatcher(events []Event, rules []Rule) (*Matcher, error) {
	byName := map[string]int{}
	for i, e := range events {
		if e.Name == "" {
			return nil, fmt.Errorf("kmsg event %d: a name is required", i)
		}
		if _, dup := byName[e.Name]; dup {
			return nil, fmt.Errorf("kmsg event %s twice", e.Name)
		}
		byName[e.Name] = i
	}
	m := &Matcher{byDriver: map[string][]int{}}
	add := func(ri int, r Rule, fam Family, drivers []string) error {
		e := len(m.event)
		m.event = append(m.event, byName[r.Event])
		m.family = append(m.family, fam)
		m.rule = append(m.rule, ri)
		m.needles = append(m.needles, []byte(r.Needle))
		var re *regexp.Regexp
		g := -1
		if r.Pattern != "" {
			var err error
			if re, err = regexp.Compile(r.Pattern); err != nil {
				return fmt.Errorf("kmsg rule %d (%s): %w", ri, r.Event, err)
			}
			g = re.SubexpIndex("netdev")
		}
		m.patterns = append(m.patterns, re)
		m.netdevIx = append(m.netdevIx, g)
		for _, d := range drivers {
			if d == "*" {
				m.any = append(m.any, e)
			} else {
				m.byDriver[d] = append(m.byDriver[d], e)
			}
		}
		return nil
	}
	for i, r := range rules {
		if _, ok := byName[r.Event]; !ok || r.Needle == "" || len(r.Drivers) == 0 {
			return nil, fmt.Errorf("kmsg rule %d (%q): a known event, a needle and drivers are required", i, r.Event)
		}
		if r.Family != "" {
			if err := add(i, r, r.Family, r.Drivers); err != nil {
				return nil, err
			}
			continue
		}
		// One entry per driver, each with the driver's family.
		for _, d := range r.Drivers {
			fam, ok := DriverFamilies[d]
			if !ok {
				return nil, fmt.Errorf("kmsg rule %d (%s): no family for driver %q", i, r.Event, d)
			}
			if err := add(i, r, fam, []string{d}); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Match returns the entry of the first rule msg matches (Event, Family
// and Rule say more of it) and the subject msg names, or -1. Most kernel lines are another driver's:
// they cost a map lookup of their first word and the needle searches of
// the any-driver rules.
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

// Event is the index in the events of entry ix's event.
func (m *Matcher) Event(ix int) int { return m.event[ix] }

// Family is entry ix's driver family.
func (m *Matcher) Family(ix int) Family { return m.family[ix] }

// Rule is the index in the rules of entry ix.
func (m *Matcher) Rule(ix int) int { return m.rule[ix] }

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
