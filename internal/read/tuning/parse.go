// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package tuning

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Unlimited is how a limit reads "unlimited" or "max": the kernel's
// RLIM_INFINITY is ^0 as well, so the value compares as larger than any
// finite limit.
const Unlimited = math.MaxUint64

// ParseSysctl parses a /proc/sys file holding one or more integers separated
// by white space ("262144\n", "4096\t131072\t6291456\n"). Values are signed:
// some sysctls take -1.
func ParseSysctl(s string) ([]int64, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, errors.New("empty sysctl value")
	}
	out := make([]int64, 0, len(fields))
	for _, f := range fields {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("sysctl value %q: not an integer", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// ParseSelected returns the bracketed choice of a sysfs "menu" file such as
// transparent_hugepage/enabled ("always [madvise] never") and every option
// offered, brackets removed.
func ParseSelected(s string) (selected string, options []string, err error) {
	for _, f := range strings.Fields(s) {
		if strings.HasPrefix(f, "[") && strings.HasSuffix(f, "]") && len(f) > 2 {
			if selected != "" {
				return "", nil, fmt.Errorf("%q: more than one [selected] option", strings.TrimSpace(s))
			}
			f = f[1 : len(f)-1]
			selected = f
		}
		if strings.ContainsAny(f, "[]") {
			return "", nil, fmt.Errorf("%q: stray bracket", strings.TrimSpace(s))
		}
		options = append(options, f)
	}
	if selected == "" {
		return "", nil, fmt.Errorf("%q: no [selected] option", strings.TrimSpace(s))
	}
	return selected, options, nil
}

// ParseHugepageSize turns a hugepage pool directory name ("hugepages-2048kB",
// "hugepages-1048576kB") into the page size in bytes.
func ParseHugepageSize(dir string) (uint64, error) {
	kb, ok := strings.CutPrefix(dir, "hugepages-")
	if ok {
		kb, ok = strings.CutSuffix(kb, "kB")
	}
	if !ok {
		return 0, fmt.Errorf("%q: want hugepages-<N>kB", dir)
	}
	v, err := strconv.ParseUint(kb, 10, 64)
	if err != nil || v == 0 || v > math.MaxUint64/1024 {
		return 0, fmt.Errorf("%q: bad page size", dir)
	}
	return v * 1024, nil
}

// Module is one line of /proc/modules.
type Module struct {
	Name string
	// Size is the module's memory size in bytes.
	Size uint64
	// RefCount is the number of users, -1 when the kernel prints "-"
	// (module unloading not supported).
	RefCount int64
	// State is Live, Loading or Unloading.
	State string
}

// ParseModules parses /proc/modules ("mlx5_ib 462848 0 - Live 0x0000000000000000").
// A line that does not parse is reported in the error and skipped; the
// modules of the other lines are still returned.
func ParseModules(s string) ([]Module, error) {
	var mods []Module
	var errs []error
	for n, line := range strings.Split(s, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		m, err := parseModuleLine(line)
		if err != nil {
			errs = append(errs, fmt.Errorf("/proc/modules line %d: %w", n+1, err))
			continue
		}
		mods = append(mods, m)
	}
	return mods, errors.Join(errs...)
}

func parseModuleLine(line string) (Module, error) {
	f := strings.Fields(line)
	// name size refcount deps state address [taint flags]
	if len(f) < 5 {
		return Module{}, fmt.Errorf("%q: want name, size, refcount, users, state", line)
	}
	size, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return Module{}, fmt.Errorf("%q: bad size %q", line, f[1])
	}
	ref := int64(-1)
	if f[2] != "-" {
		if ref, err = strconv.ParseInt(f[2], 10, 64); err != nil || ref < 0 {
			return Module{}, fmt.Errorf("%q: bad reference count %q", line, f[2])
		}
	}
	switch f[4] {
	case "Live", "Loading", "Unloading":
	default:
		return Module{}, fmt.Errorf("%q: unknown state %q", line, f[4])
	}
	return Module{Name: f[0], Size: size, RefCount: ref, State: f[4]}, nil
}

// Limit is one row of /proc/<pid>/limits. Soft and Hard are Unlimited when
// the file says "unlimited".
type Limit struct {
	Name  string
	Soft  uint64
	Hard  uint64
	Units string
}

// MemlockLimit is the row name of RLIMIT_MEMLOCK in /proc/<pid>/limits.
const MemlockLimit = "Max locked memory"

// ParseLimits parses /proc/<pid>/limits. The kernel prints fixed-width
// columns ("%-25s %-20s %-20s %-10s"), but a name has spaces and the units
// column can be empty, so the row is split at its first value instead: the
// name is every word before the first number or "unlimited".
func ParseLimits(s string) ([]Limit, error) {
	lines := strings.Split(s, "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "Limit") {
		return nil, errors.New("limits: no \"Limit  Soft Limit  Hard Limit  Units\" header")
	}
	var out []Limit
	var errs []error
	for _, line := range lines[1:] {
		if strings.TrimSpace(line) == "" {
			continue
		}
		l, err := parseLimitLine(line)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, l)
	}
	return out, errors.Join(errs...)
}

func parseLimitValue(s string) (uint64, bool) {
	if s == "unlimited" {
		return Unlimited, true
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

func parseLimitLine(line string) (Limit, error) {
	f := strings.Fields(line)
	i := 0
	for i < len(f) {
		if _, ok := parseLimitValue(f[i]); ok {
			break
		}
		i++
	}
	if i == 0 || i+2 > len(f) || len(f) > i+3 {
		return Limit{}, fmt.Errorf("limits line %q: want <name> <soft> <hard> [units]", line)
	}
	soft, _ := parseLimitValue(f[i])
	hard, ok := parseLimitValue(f[i+1])
	if !ok {
		return Limit{}, fmt.Errorf("limits line %q: bad hard limit %q", line, f[i+1])
	}
	l := Limit{Name: strings.Join(f[:i], " "), Soft: soft, Hard: hard}
	if len(f) == i+3 {
		l.Units = f[i+2]
	}
	return l, nil
}

// RDMALimit is one device line of a cgroup v2 rdma.max file
// ("mlx5_0 hca_handle=2 hca_object=2000"); a value of "max" is Unlimited.
type RDMALimit struct {
	Device    string
	HCAHandle uint64
	HCAObject uint64
}

// Limited reports whether any resource has a finite limit.
func (l RDMALimit) Limited() bool { return l.HCAHandle != Unlimited || l.HCAObject != Unlimited }

// ParseRDMAMax parses a cgroup v2 rdma.max (or rdma.current) file. The kernel
// prints one line per RDMA device with every resource it limits; unset
// limits read "max". hca_handle and hca_object are in every kernel since
// the controller's start; resources a newer kernel adds (key=N|max) are
// accepted and left out. A bad line is reported and skipped.
func ParseRDMAMax(s string) ([]RDMALimit, error) {
	var out []RDMALimit
	var errs []error
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		l := RDMALimit{Device: f[0], HCAHandle: Unlimited, HCAObject: Unlimited}
		seen := 0
		bad := strings.Contains(f[0], "=")
		keys := map[string]bool{}
		for _, kv := range f[1:] {
			k, v, ok := strings.Cut(kv, "=")
			var n uint64 = Unlimited
			if v != "max" {
				var err error
				if n, err = strconv.ParseUint(v, 10, 64); err != nil {
					ok = false
				}
			}
			switch {
			case !ok || k == "" || keys[k]:
				bad = true
			case k == "hca_handle":
				l.HCAHandle = n
				seen |= 1
			case k == "hca_object":
				l.HCAObject = n
				seen |= 2
			}
			keys[k] = true
		}
		if bad || seen != 3 {
			errs = append(errs, fmt.Errorf("rdma.max line %q: want <device> hca_handle=<N|max> hca_object=<N|max>", line))
			continue
		}
		out = append(out, l)
	}
	return out, errors.Join(errs...)
}

// RDMACgroupMax is the largest finite limit rdma.max takes: the kernel
// keeps limits in an int and prints S32_MAX as "max".
const RDMACgroupMax = 1<<31 - 2

// FormatRDMALimit is the device's line as the kernel prints it in rdma.max
// and takes it in a write (one device per write), without the newline.
func FormatRDMALimit(l RDMALimit) string {
	v := func(n uint64) string {
		if n == Unlimited {
			return "max"
		}
		return strconv.FormatUint(n, 10)
	}
	return l.Device + " hca_handle=" + v(l.HCAHandle) + " hca_object=" + v(l.HCAObject)
}

// ParseSELinuxEnforce parses /sys/fs/selinux/enforce: 1 enforcing, 0
// permissive.
func ParseSELinuxEnforce(s string) (string, error) {
	switch strings.TrimSpace(s) {
	case "1":
		return "enforcing", nil
	case "0":
		return "permissive", nil
	}
	return "", fmt.Errorf("selinux enforce %q: want 0 or 1", strings.TrimSpace(s))
}

// ParseWord parses a file holding one word, such as scaling_governor or a
// process comm: trimmed, non-empty, printable, no inner white space.
func ParseWord(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("empty file")
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f || r == 0xfffd {
			return "", fmt.Errorf("%q: not a single printable word", s)
		}
	}
	return s, nil
}
