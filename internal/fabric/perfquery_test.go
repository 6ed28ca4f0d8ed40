// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"bytes"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
)

func readPQ(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(pqFixture(name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParsePerfqueryHeaders(t *testing.T) {
	var blocks []*pqBlock
	junk, errText, err := parsePerfquery(bytes.NewReader(readPQ(t, "leaf2-l-1-36-error.stdout")), func(b *pqBlock) { blocks = append(blocks, b) })
	if err != nil || junk != 0 {
		t.Fatalf("junk %d err %v", junk, err)
	}
	if errText != "perfquery: iberror: failed: perfquery" {
		t.Errorf("errText %q", errText)
	}
	if len(blocks) != 3 || blocks[2].port != 3 || blocks[2].lid != 3 || blocks[2].cap != 0x1300 || blocks[2].extended {
		t.Fatalf("blocks %+v", blocks)
	}
	blocks = nil
	if _, _, err := parsePerfquery(bytes.NewReader(readPQ(t, "leaf1-x-l-1-36.stdout")), func(b *pqBlock) { blocks = append(blocks, b) }); err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 36 || !blocks[0].extended || !blocks[0].hasHeader2 || blocks[0].cap2 != 0 || !blocks[0].extendedAdvertised() {
		t.Fatalf("extended blocks: %d, first %+v", len(blocks), blocks[0])
	}
}

// repeatReader yields b n times without holding more than b.
type repeatReader struct {
	b   []byte
	n   int
	off int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	c := copy(p, r.b[r.off:])
	r.off += c
	if r.off == len(r.b) {
		r.off, r.n = 0, r.n-1
	}
	return c, nil
}

// TestParsePerfqueryBoundedMemory: 200 MB of output (one recorded block
// repeated) is parsed one block at a time: the live heap after the parse
// does not grow with the input.
func TestParsePerfqueryBoundedMemory(t *testing.T) {
	all := readPQ(t, "leaf1-l-1-36.stdout")
	block := all[:bytes.Index(all[1:], []byte("\n#"))+2]
	n := 200 << 20 / len(block)
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	seen := 0
	var peak uint64
	_, _, err := parsePerfquery(&repeatReader{b: block, n: n}, func(*pqBlock) {
		seen++
		if seen%50000 == 0 {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
	})
	runtime.ReadMemStats(&ms1)
	if err != nil || seen != n {
		t.Fatalf("parsed %d of %d blocks, err %v", seen, n, err)
	}
	// Garbage from the parse is collectable; what is in use must stay
	// far below the 200 MB read (a few MB for the runtime and the test).
	if peak > ms0.HeapInuse+32<<20 {
		t.Errorf("heap in use reached %d MB while parsing (%d MB before)", peak>>20, ms0.HeapInuse>>20)
	}
}

func FuzzParsePerfquery(f *testing.F) {
	for _, name := range []string{"leaf1-l-1-36.stdout", "leaf1-x-l-1-36.stdout", "leaf2-l-1-36-error.stdout", "node01-l-1.stdout"} {
		f.Add(readPQ(f, name))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = parsePerfquery(bytes.NewReader(b), func(bl *pqBlock) {
			var pc PortCounters
			if applyBasic(&pc, bl) {
				for id := range NumCounters {
					v := pc.Values[id]
					if v.Present && (v.Bits == 0 || v.Bits > 32) {
						t.Fatalf("PortCounters value %s read with %d bits", Counters[id].Field, v.Bits)
					}
				}
			}
			if applyExtended(&pc, bl) && !strings.Contains(string(b), "extended") {
				t.Fatal("extended values taken from a block that is not PortCountersExtended")
			}
		})
	})
}
