// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package cpulist is the one parser for the kernel's CPU list format
// ("0-15,32-47"), which sysfs and procfs print for local_cpulist,
// node<N>/cpulist, cpu/online and /proc/irq/N/smp_affinity_list and
// effective_affinity_list (the kernel's "%*pbl").
package cpulist

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// MaxCPU bounds the CPU numbers accepted. x86 kernels allow at most 8192
// (CONFIG_MAXSMP); the bound keeps a garbage file from allocating a huge set.
const MaxCPU = 1 << 16

// Set is a set of CPU numbers. The zero value is the empty set.
type Set struct {
	w []uint64
}

// Of returns the set of the given CPUs (for tests and callers that build
// sets by hand). CPUs outside [0, MaxCPU) are ignored.
func Of(cpus ...int) Set {
	var s Set
	for _, c := range cpus {
		s.Add(c)
	}
	return s
}

// Parse parses a CPU list: comma-separated CPU numbers and inclusive ranges
// ("0-3,8,10-11"), surrounding white space ignored. The empty string is the
// empty set, as the kernel prints an empty mask (an IRQ that was never
// started has an empty effective_affinity_list).
func Parse(s string) (Set, error) {
	var set Set
	s = strings.TrimSpace(s)
	if s == "" {
		return set, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := cpu(lo)
		if err != nil {
			return Set{}, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = cpu(hi); err != nil {
				return Set{}, fmt.Errorf("cpu list %q: %w", s, err)
			}
			if b < a {
				return Set{}, fmt.Errorf("cpu list %q: range %s runs backwards", s, part)
			}
		}
		set.addRange(a, b)
	}
	return set, nil
}

var errCPU = errors.New("bad cpu number")

func cpu(s string) (int, error) {
	// strconv.Atoi accepts "+1"; the kernel never prints a sign.
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, fmt.Errorf("%w %q", errCPU, s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n >= MaxCPU {
		return 0, fmt.Errorf("%w %q", errCPU, s)
	}
	return n, nil
}

func (s *Set) grow(cpu int) {
	if need := cpu/64 + 1; need > len(s.w) {
		s.w = append(s.w, make([]uint64, need-len(s.w))...)
	}
}

func (s *Set) addRange(a, b int) {
	s.grow(b)
	for c := a; c <= b; {
		if c%64 == 0 && b-c >= 63 {
			s.w[c/64] = ^uint64(0)
			c += 64
			continue
		}
		s.w[c/64] |= 1 << (c % 64)
		c++
	}
}

// Add adds a CPU; numbers outside [0, MaxCPU) are ignored.
func (s *Set) Add(cpu int) {
	if cpu < 0 || cpu >= MaxCPU {
		return
	}
	s.grow(cpu)
	s.w[cpu/64] |= 1 << (cpu % 64)
}

// AddSet adds every CPU of o.
func (s *Set) AddSet(o Set) {
	if len(o.w) > len(s.w) {
		s.w = append(s.w, make([]uint64, len(o.w)-len(s.w))...)
	}
	for i, w := range o.w {
		s.w[i] |= w
	}
}

// Contains reports whether cpu is in the set.
func (s Set) Contains(cpu int) bool {
	if cpu < 0 || cpu/64 >= len(s.w) {
		return false
	}
	return s.w[cpu/64]&(1<<(cpu%64)) != 0
}

// Len is the number of CPUs in the set.
func (s Set) Len() int {
	n := 0
	for _, w := range s.w {
		n += bits.OnesCount64(w)
	}
	return n
}

// Empty reports whether the set has no CPU.
func (s Set) Empty() bool { return s.Len() == 0 }

// Minus returns the CPUs of s that are not in o.
func (s Set) Minus(o Set) Set {
	out := Set{w: make([]uint64, len(s.w))}
	for i, w := range s.w {
		if i < len(o.w) {
			w &^= o.w[i]
		}
		out.w[i] = w
	}
	return out
}

// SubsetOf reports whether every CPU of s is in o.
func (s Set) SubsetOf(o Set) bool {
	for i, w := range s.w {
		var ow uint64
		if i < len(o.w) {
			ow = o.w[i]
		}
		if w&^ow != 0 {
			return false
		}
	}
	return true
}

// Equal reports whether both sets hold the same CPUs.
func (s Set) Equal(o Set) bool { return s.SubsetOf(o) && o.SubsetOf(s) }

// CPUs lists the CPUs in ascending order.
func (s Set) CPUs() []int {
	out := make([]int, 0, s.Len())
	for i, w := range s.w {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			out = append(out, i*64+b)
			w &^= 1 << b
		}
	}
	return out
}

// String formats the set as the kernel does: ascending, ranges of two or
// more CPUs as "a-b" ("0-15,32-47"); the empty set is "".
func (s Set) String() string {
	var b strings.Builder
	cpus := s.CPUs()
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}
