// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package opensm reads the local OpenSM subnet manager: whether an opensm
// process runs (from /proc), and its configuration (opensm.conf and the
// distributions' sysconfig/default files).
//
// Secrets: opensm.conf holds m_key, sm_key, sa_key and cc_key, and opensm
// takes --smkey and --cc_key on its command line. This package never keeps
// their values: the parsers drop them the moment they are recognised and
// keep only the option's name, and a line or argument that cannot be
// parsed is kept only as a line number. No value that could be a key ever
// reaches a metric, a log line, an error or a diagnose finding.
package opensm

import (
	"bufio"
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Config is one parsed configuration file.
type Config struct {
	// Path is the file's path on the host ("/etc/rdma/opensm.conf").
	Path string
	// Values holds every non-secret option, last occurrence wins. OpenSM's
	// "(null)" (unset string) is kept as is.
	Values map[string]string
	// Secrets lists the secret options present, by name only, sorted.
	Secrets []string
	// Malformed counts lines that are not "key value" (or KEY=value in a
	// shell-style file); MalformedLines lists the first few line numbers.
	// Their content is never kept: a mistyped key line could hold a key.
	Malformed      int
	MalformedLines []int
}

// nonSecret are option names that contain "key" but hold no secret
// (opensm osm_subnet.c option table): P_Key handling and M_Key policy.
var nonSecret = map[string]bool{
	"m_key_lease_period":     true,
	"m_key_protection_level": true,
	"m_key_lookup":           true,
	"keep_pkey_indexes":      true,
	"allow_both_pkeys":       true,
}

// IsSecret reports whether an option's value must never be shown: every
// *_key (m_key, sm_key, sa_key, cc_key, ...) and, to be safe, any other name
// containing "key" that is not known to be harmless.
func IsSecret(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "key") && !nonSecret[n]
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func (c *Config) malformed(n int) {
	c.Malformed++
	if len(c.MalformedLines) < 10 {
		c.MalformedLines = append(c.MalformedLines, n)
	}
}

func (c *Config) set(name, value string) {
	if IsSecret(name) {
		// Only the name is kept; the value is dropped here.
		for _, s := range c.Secrets {
			if s == name {
				return
			}
		}
		c.Secrets = append(c.Secrets, name)
		sort.Strings(c.Secrets)
		return
	}
	c.Values[name] = value
}

// ParseConfig parses opensm.conf: one "key value" per line (the value is
// the rest of the line: "cc_ca_cong_setting_ccti_timer 0 0"), "#"
// comments, blank lines. A line whose first word is not an option name, or
// that has no value, is skipped and counted.
func ParseConfig(path string, b []byte) *Config {
	c := &Config{Path: path, Values: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.IndexAny(line, " \t")
		if sp < 0 {
			c.malformed(n)
			continue
		}
		name, value := line[:sp], strings.TrimSpace(line[sp+1:])
		if !validName(name) || value == "" {
			c.malformed(n)
			continue
		}
		c.set(name, value)
	}
	if sc.Err() != nil {
		c.malformed(n + 1) // a line longer than 1 MiB: the rest is not read
	}
	return c
}

// ParseShell parses the shell-variable files the init scripts read:
// /etc/sysconfig/opensm (RHEL: GUIDS, PRIORITY) and /etc/default/opensm
// (Debian: PORTS). Lines are NAME=value with optional quotes and an
// optional "export"; anything else is skipped and counted.
func ParseShell(path string, b []byte) *Config {
	c := &Config{Path: path, Values: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		name, value, ok := strings.Cut(line, "=")
		if !ok || !validName(name) {
			c.malformed(n)
			continue
		}
		value = strings.TrimSpace(value)
		if len(value) >= 2 && (value[0] == '"' && value[len(value)-1] == '"' || value[0] == '\'' && value[len(value)-1] == '\'') {
			value = value[1 : len(value)-1]
		}
		c.set(name, value)
	}
	if sc.Err() != nil {
		c.malformed(n + 1)
	}
	return c
}

// Get returns an option's value; "(null)" and absent are both unset.
// Secret options are never returned.
func (c *Config) Get(name string) (string, bool) {
	if c == nil {
		return "", false
	}
	v, ok := c.Values[name]
	if !ok || v == "(null)" {
		return "", false
	}
	return v, true
}

// Int returns a decimal or 0x-hex integer option.
func (c *Config) Int(name string) (int64, bool, error) {
	v, ok := c.Get(name)
	if !ok {
		return 0, false, nil
	}
	i, err := strconv.ParseInt(v, 0, 64)
	if err != nil {
		return 0, true, fmt.Errorf("%s: option %s: %q is not an integer", c.Path, name, v)
	}
	return i, true, nil
}

// GUID returns a 64-bit hex option (guid, subnet_prefix) as "0x%016x".
func (c *Config) GUID(name string) (string, bool, error) {
	v, ok := c.Get(name)
	if !ok {
		return "", false, nil
	}
	h, hasPrefix := strings.CutPrefix(strings.ToLower(v), "0x")
	g, err := strconv.ParseUint(h, 16, 64)
	if !hasPrefix || err != nil {
		return "", true, fmt.Errorf("%s: option %s: %q is not a 0x GUID", c.Path, name, v)
	}
	return fmt.Sprintf("0x%016x", g), true, nil
}
