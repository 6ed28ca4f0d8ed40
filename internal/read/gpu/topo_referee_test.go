// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package gpu

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The recording behind the epyc-genoa fixture host holds both the PCI tree
// (lspci -tv) and nvidia-smi topo -m of the same machine.
const epycRecording = "../../../fixtures/recorded/lspci-tv-topo-m-epyc9374f-rtx6000ada-cx7-stelline.txt"

// topoM is a recorded nvidia-smi topo -m: the cells by row and column name
// (GPU0, NIC1, ...) and the NIC legend (NIC0 -> mlx5_0).
type topoM struct {
	cols  []string
	cells map[string]map[string]string
	nics  map[string]string
}

var nicLegend = regexp.MustCompile(`^\s*(NIC[0-9]+): (\S+)$`)

// parseTopoM reads the matrix that follows the "nvidia-smi topo -m" command
// line of a recording: a header naming the GPU and NIC columns, then one
// row per GPU and NIC (trailing CPU and NUMA affinity columns ignored), and
// the NIC legend below.
func parseTopoM(t *testing.T, text string) topoM {
	t.Helper()
	lines := strings.Split(text, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasSuffix(l, "nvidia-smi topo -m") {
			start = i + 1
			break
		}
	}
	if start < 0 || start >= len(lines) {
		t.Fatal("no nvidia-smi topo -m in the recording")
	}
	m := topoM{cells: map[string]map[string]string{}, nics: map[string]string{}}
	for _, f := range strings.Fields(lines[start]) {
		if !strings.HasPrefix(f, "GPU") && !strings.HasPrefix(f, "NIC") {
			break
		}
		m.cols = append(m.cols, f)
	}
	for _, l := range lines[start+1:] {
		f := strings.Fields(l)
		if len(f) > len(m.cols) && (strings.HasPrefix(f[0], "GPU") || strings.HasPrefix(f[0], "NIC")) && !strings.HasSuffix(f[0], ":") {
			row := map[string]string{}
			for i, c := range m.cols {
				row[c] = f[1+i]
			}
			m.cells[f[0]] = row
			continue
		}
		if g := nicLegend.FindStringSubmatch(l); g != nil {
			m.nics[g[1]] = g[2]
		}
		if strings.HasPrefix(l, "[...]") {
			break
		}
	}
	return m
}

// The real referee: epyc-genoa's GPUs and ConnectX-7 functions sit each
// right below a root port of their own host bridge, four host bridges per
// socket (AMD's quadrants), and nvidia-smi recorded the matrix of that very
// tree. Every cell the exporter computes, GPU to GPU, GPU to NIC and NIC to
// NIC, must be the recorded one: NODE within a socket, SYS across, PIX
// between the two ports of one card.
func TestMatrixEPYCAgreesWithNvidiaSmi(t *testing.T) {
	b, err := os.ReadFile(epycRecording)
	if err != nil {
		t.Fatal(err)
	}
	rec := parseTopoM(t, string(b))
	if len(rec.cols) != 8 || len(rec.cells) != 8 || len(rec.nics) != 4 {
		t.Fatalf("recorded matrix: %d columns, %d rows, %d NICs", len(rec.cols), len(rec.cells), len(rec.nics))
	}
	s := readFixture(t, "epyc-genoa", 2)
	if len(s.Errors) != 0 {
		t.Fatalf("errors: %v", s.Errors)
	}
	if len(s.GPUs) != 4 || len(s.Devices) != 4 {
		t.Fatalf("%d GPUs, %d devices", len(s.GPUs), len(s.Devices))
	}
	// nvidia-smi numbers GPUs in PCI bus order, as Read does; its NIC
	// legend names the RDMA device of each NIC column.
	type end struct {
		chain Chain
		numa  Opt[int]
	}
	ends := map[string]end{}
	for _, g := range s.GPUs {
		ends["GPU"+g.Name()] = end{g.Chain, g.Function.NUMANode}
	}
	byName := map[string]Endpoint{}
	for _, d := range s.Devices {
		byName[d.Name] = d
	}
	for nic, dev := range rec.nics {
		d, ok := byName[dev]
		if !ok {
			t.Fatalf("%s (%s): no such RDMA device on the fixture", nic, dev)
		}
		ends[nic] = end{d.Chain, d.NUMANode}
	}
	cells := 0
	for _, r := range rec.cols {
		for _, c := range rec.cols {
			want := rec.cells[r][c]
			if r == c {
				if want != "X" {
					t.Errorf("%s/%s: recorded %q on the diagonal", r, c, want)
				}
				continue
			}
			got, ok := Relation(ends[r].chain, ends[c].chain, ends[r].numa, ends[c].numa, 2)
			if !ok || got.String() != want {
				t.Errorf("%s/%s: computed %v (%v), nvidia-smi recorded %s", r, c, got, ok, want)
			}
			cells++
		}
	}
	if cells != 56 {
		t.Errorf("compared %d cells, want 56", cells)
	}
	// The snapshot's own GPU x device affinity is the same relation.
	for _, a := range s.Affinity {
		nic := ""
		for n, d := range rec.nics {
			if d == a.Device {
				nic = n
			}
		}
		if want := rec.cells["GPU"+s.GPUs[a.GPU].Name()][nic]; a.Link.String() != want {
			t.Errorf("affinity GPU%d/%s: %v, recorded %s", a.GPU, a.Device, a.Link, want)
		}
	}
	if l, devs, ok := s.Closest(2); !ok || l != NODE || strings.Join(devs, ",") != "mlx5_2,mlx5_3" {
		t.Errorf("closest of GPU2 = %v %v %v", l, devs, ok)
	}
	if g := s.GPUs[0]; g.Address != "0000:01:00.0" || g.Driver != "nvidia" || g.Device != 0x26b1 || g.Class != 0x030000 ||
		g.Function.LinkSpeed.V != 2.5 || g.Function.MaxLinkSpeed.V != 16 || g.Chain.Root != "pci0000:00" ||
		strings.Join(g.Chain.Bridges, ",") != "0000:00:01.1" {
		t.Errorf("GPU0 = %+v", g)
	}
}

// The parser reads what nvidia-smi prints, not a fixed layout: a cell that
// differs from the legend-derived one is found.
func TestParseTopoM(t *testing.T) {
	m := parseTopoM(t, `$ nvidia-smi topo -m
	GPU0	GPU1	NIC0	CPU Affinity	NUMA Affinity	GPU NUMA ID
GPU0	 X 	SYS	PHB	0-7	0		N/A
GPU1	SYS	 X 	SYS	8-15	1		N/A
NIC0	PHB	SYS	 X

NIC Legend:

  NIC0: mlx5_0
`)
	if strings.Join(m.cols, ",") != "GPU0,GPU1,NIC0" || m.cells["GPU0"]["NIC0"] != "PHB" || m.cells["NIC0"]["GPU1"] != "SYS" || m.nics["NIC0"] != "mlx5_0" {
		t.Errorf("%+v", m)
	}
}
