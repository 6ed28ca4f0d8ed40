// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package infiniband

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/names"
)

// The label policy on a copy of cx6-hdr-fdr with what one host gave
// (issue 29): 12,036 files in a port's hw_counters/, 600 in its
// counters/, a 100 KB node_desc, and a counter file whose name is not a
// name (an escape sequence) and one too long. Each directory keeps
// names.MaxNamesPerFamily names, node_desc is cut to names.MaxLabelBytes
// on a character boundary, and what was cut, refused or left out is
// counted.
func TestReadLabelPolicy(t *testing.T) {
	root := t.TempDir()
	hostfstest.CopyTree(t, "../../../fixtures/hosts/cx6-hdr-fdr/sys", root)
	dev := filepath.Join(root, "class/infiniband/mlx5_0")
	write := func(rel, s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dev, rel), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// 100 KB of node description, in two-byte characters from byte 1 on,
	// so the cut falls inside one unless it is made on a boundary.
	desc := "cx6-hdr-fdr " + strings.Repeat("é", 50_000)
	write("node_desc", desc+"\n")
	existing := func(dir string) int {
		es, err := os.ReadDir(filepath.Join(dev, dir))
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	hwBefore, pmaBefore := existing("ports/1/hw_counters"), existing("ports/1/counters")
	for i := range 12_036 - hwBefore {
		write(fmt.Sprintf("ports/1/hw_counters/np_ecn_marked_roce_packets_%05d", i), "7\n")
	}
	for i := range 600 - pmaBefore {
		write(fmt.Sprintf("ports/1/counters/port_rcv_data_%03d", i), "7\n")
	}
	write("ports/1/hw_counters/out_of_buffer\x1b]0;owned\x07", "1\n")
	write("ports/1/hw_counters/"+strings.Repeat("x", names.MaxNameBytes+1), "1\n")

	cut, refused, over := names.Limited(names.Cut), names.Limited(names.Refused), names.Limited(names.OverCap)
	c := readClass(t, hostfs.Dir(root), nil)
	d := device(t, c, "mlx5_0")
	p := d.Ports[0]
	if len(p.HWCounters) != names.MaxNamesPerFamily || len(p.Counters) != names.MaxNamesPerFamily {
		t.Errorf("port 1: %d hw counters, %d PMA counters; want %d each", len(p.HWCounters), len(p.Counters), names.MaxNamesPerFamily)
	}
	for _, hc := range p.HWCounters {
		if !names.Token(hc.Name) {
			t.Errorf("hw counter %q kept", hc.Name)
		}
	}
	if nd := d.NodeDesc.V; !d.NodeDesc.OK || len(nd) > names.MaxLabelBytes || len(nd) < names.MaxLabelBytes-1 ||
		!utf8.ValidString(nd) || !strings.HasPrefix(desc, nd) {
		t.Errorf("node_desc: %d bytes %q", len(nd), nd)
	}
	if n := names.Limited(names.Cut) - cut; n != 1 {
		t.Errorf("%d values counted cut, want 1 (node_desc)", n)
	}
	if n := names.Limited(names.Refused) - refused; n != 2 {
		t.Errorf("%d names counted refused, want 2", n)
	}
	// lifespan in hw_counters is not a counter; the other device's
	// directories hold fewer names than the cap.
	lifespan := 0
	if _, err := os.Stat(filepath.Join(dev, "ports/1/hw_counters/lifespan")); err == nil {
		lifespan = 1
	}
	if n, want := names.Limited(names.OverCap)-over, uint64(12_036-lifespan+600-2*names.MaxNamesPerFamily); n != want {
		t.Errorf("%d names counted over the cap, want %d", n, want)
	}
	// The other device is read as before: every hw counter file.
	if o, n := device(t, c, "mlx5_1"), existing("../mlx5_1/ports/1/hw_counters")-lifespan; len(o.Ports[0].HWCounters) != n {
		t.Errorf("mlx5_1: %d hw counters, want %d", len(o.Ports[0].HWCounters), n)
	}
}
