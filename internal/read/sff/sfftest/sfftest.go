// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package sfftest loads recorded module memory dumps for tests of the
// sff decoder and of its readers.
package sfftest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The memory layout constants, as package sff has them (sff's own tests
// import this package, so it cannot import sff).
const (
	halfPage = 128
	addrA0   = 0x50
	addrA2   = 0x51
)

// Half is one half page of a recorded memory.
type Half struct {
	Addr, Page uint8
	// Upper is the half at offsets 128-255.
	Upper bool
}

// Memory is a recorded module memory: the half pages the recording has.
type Memory struct {
	Halves map[Half][]byte
	// Reads records Read calls, to show the decoder reads only what it
	// needs.
	Reads []Half
}

// Read implements sff.Reader from the recording; a half page it lacks
// is an error.
func (m *Memory) Read(addr, page uint8, offset, length int) ([]byte, error) {
	h := Half{Addr: addr, Page: page, Upper: offset >= halfPage}
	m.Reads = append(m.Reads, h)
	b, ok := m.Halves[h]
	if !ok {
		return nil, fmt.Errorf("page 0x%02x not in the recording", page)
	}
	start := offset % halfPage
	if start+length > len(b) {
		return b[start:], nil
	}
	return b[start : start+length], nil
}

func (m *Memory) set(h Half, off int, v []byte) {
	if m.Halves[h] == nil {
		m.Halves[h] = make([]byte, halfPage)
	}
	copy(m.Halves[h][off:], v)
}

var (
	// ethtool -m ... hex on: "0x0120:         00 11 ...". Offsets are
	// ethtool's linear layout: 0-255 page 00h, then the upper halves of
	// pages 01h, 02h, 03h (SFF-8636); 256-511 A2h (SFF-8472).
	ethtoolRow = regexp.MustCompile(`^0x([0-9a-f]{4}):\s+((?:[0-9a-f]{2} ?)+)$`)
	// Juniper picd: a "... Page NNh:" or "Lower Page:" title, then
	// "  0x80:4b 00 ..." rows.
	picdTitle = regexp.MustCompile(`(Lower Page|Upper Page ([0-9a-f]{2})h):$`)
	picdRow   = regexp.MustCompile(`^\s+0x([0-9a-f]{2}):((?:[0-9a-f]{2} ?){16})$`)
)

// HexBytes parses space-separated hex bytes.
func HexBytes(t testing.TB, s string) []byte {
	t.Helper()
	var out []byte
	for _, f := range strings.Fields(s) {
		v, err := strconv.ParseUint(f, 16, 8)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, byte(v))
	}
	return out
}

// Load reads a recorded dump: ethtool -m hex rows (a2: offsets 256-511
// are SFF-8472's A2h; else the upper halves of pages 01h-03h) or Juniper
// picd page rows.
func Load(t testing.TB, path string, a2 bool) *Memory {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := &Memory{Halves: map[Half][]byte{}}
	page, inPage := uint8(0), false
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " ")
		if g := ethtoolRow.FindStringSubmatch(line); g != nil {
			off, _ := strconv.ParseUint(g[1], 16, 16)
			h := Half{Addr: addrA0, Page: 0, Upper: off >= halfPage}
			switch {
			case off >= 2*halfPage && a2:
				h = Half{Addr: addrA2, Page: 0, Upper: off >= 3*halfPage}
			case off >= 2*halfPage:
				h = Half{Addr: addrA0, Page: uint8(off/halfPage - 1), Upper: true}
			}
			m.set(h, int(off%halfPage), HexBytes(t, g[2]))
			continue
		}
		if g := picdTitle.FindStringSubmatch(line); g != nil {
			inPage, page = true, 0
			if g[2] != "" {
				p, _ := strconv.ParseUint(g[2], 16, 8)
				page = uint8(p)
			}
			continue
		}
		if g := picdRow.FindStringSubmatch(line); g != nil && inPage {
			off, _ := strconv.ParseUint(g[1], 16, 8)
			m.set(Half{Addr: addrA0, Page: page, Upper: off >= halfPage}, int(off%halfPage), HexBytes(t, g[2]))
		}
	}
	if len(m.Halves) == 0 {
		t.Fatalf("%s: no dump found", path)
	}
	return m
}
