// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/gpu"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// recordedTree is the recorded `lspci -tv` of the real machine a fixture
// host was built from, for hosts whose trees leave bridges out as devices
// (epyc-genoa's root ports are bare directories: no bus/pci/devices entry,
// no config), which the lspci run on the tree then cannot see. The
// recording is the better referee there: it is the real host's own tree.
var recordedTree = map[string]string{
	"epyc-genoa": "lspci-tv-topo-m-epyc9374f-rtx6000ada-cx7-stelline.txt",
}

// The real lspci is the referee of the PCI ancestor chains: on every
// fixture host with a GPU, the bridges lspci -tv draws between each GPU
// and each RDMA device's function and its host bridge are the chain the
// exporter computes from the sysfs paths, and the nvidia-smi relation
// computed from lspci's chains is each rdma_gpu_device_affinity series the
// exporter serves. lspci builds its tree from the bus numbers in each
// bridge's config header, not from the sysfs paths, so the two are
// independent readings of one tree.
func TestLspciTreeAgrees(t *testing.T) {
	requireTool(t, "lspci")
	requireTool(t, "unshare")
	root := repoRoot(t)
	n := 0
	for _, host := range hosts(t) {
		dir := filepath.Join(root, "fixtures", "hosts", host)
		snap := readGPUs(t, dir)
		if len(snap.GPUs) == 0 {
			continue
		}
		n++
		t.Run(host, func(t *testing.T) {
			var out, source string
			if rec, ok := recordedTree[host]; ok {
				b, err := os.ReadFile(filepath.Join(root, "fixtures", "recorded", rec))
				if err != nil {
					t.Fatal(err)
				}
				out, source = recordedLspciTree(string(b)), "recorded lspci -tv ("+rec+")"
			} else {
				out, source = lspciOnFixture(t, host, "-tv"), "lspci -tv"
			}
			tree, err := parseLspciTree(out)
			if err != nil {
				t.Fatalf("%s: %v\n%s", source, err, out)
			}
			check := func(what, addr string, want gpu.Chain) gpu.Chain {
				got, ok := tree[addr]
				switch {
				case !ok:
					t.Errorf("%s %s: not in %s", what, addr, source)
				case got.Root != want.Root || !slices.Equal(got.Bridges, want.Bridges):
					t.Errorf("%s %s: %s has %s, the exporter %s", what, addr, source, chainString(got), chainString(want))
				}
				return got
			}
			gpus := map[int]gpu.Chain{}
			for _, g := range snap.GPUs {
				gpus[g.Index] = check("GPU"+g.Name(), g.Address, g.Chain)
			}
			devs := map[string]gpu.Chain{}
			for _, d := range snap.Devices {
				devs[d.Name] = check(d.Name, d.Address, d.Chain)
			}
			if len(snap.Devices) == 0 {
				t.Fatal("a GPU host without RDMA devices: nothing to relate")
			}
			// The relation from lspci's chains, with the exporter's NUMA
			// nodes (lspci -tv does not show them), against the served
			// series.
			e := start(t, hostArgs(t, host)...)
			_, body := e.get(t, "/metrics")
			served := map[string]string{}
			for _, s := range scrapeFamilies(t, body)["rdma_gpu_device_affinity"] {
				served["GPU"+s.labels["gpu"]+" "+s.labels["device"]] = s.labels["link"]
			}
			nodes := numaNodes(t, dir)
			pairs := 0
			for _, g := range snap.GPUs {
				for _, d := range snap.Devices {
					l, ok := gpu.Relation(gpus[g.Index], devs[d.Name], g.Function.NUMANode, d.NUMANode, nodes)
					key := fmt.Sprintf("GPU%d %s", g.Index, d.Name)
					if got := served[key]; !ok || got != l.String() {
						t.Errorf("%s: %s says %v (known %v), the exporter serves %q", key, source, l, ok, got)
					}
					pairs++
				}
			}
			if pairs != len(served) {
				t.Errorf("%d GPU x device pairs, %d rdma_gpu_device_affinity series", pairs, len(served))
			}
		})
	}
	if n < 4 {
		t.Errorf("%d GPU fixture hosts, want at least hgx-h100, -nogdr, -swapped and epyc-genoa", n)
	}
}

func readGPUs(t *testing.T, dir string) *gpu.Snapshot {
	t.Helper()
	p, err := hostfs.Paths{Rootfs: dir}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	s, err := gpu.Read(context.Background(), p.Open(), gpu.Options{Nodes: numaNodes(t, dir)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// numaNodes counts the fixture's sys/devices/system/node/node<N>.
func numaNodes(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "sys/devices/system/node/node[0-9]*"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

func chainString(c gpu.Chain) string {
	return strings.Join(append([]string{c.Root}, c.Bridges...), "/")
}

// recordedLspciTree cuts the lspci -tv block out of a recording: the
// lines after the one ending in "lspci -tv" up to the closing fence.
func recordedLspciTree(rec string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(rec, "\n") {
		switch {
		case strings.HasSuffix(l, "lspci -tv"):
			in = true
		case in && strings.HasPrefix(l, "```"):
			return b.String()
		case in:
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// An lspci -tv node: a root bus "[dddd:bb]", or a function "dd.f", which
// a bridge follows with its bus range "-[bb]" or "-[bb-ss]".
var (
	tvRoot = regexp.MustCompile(`^\[([0-9a-f]{4}):([0-9a-f]{2})\]`)
	tvFunc = regexp.MustCompile(`^([0-9a-f]{2})\.([0-7])(?:-\[([0-9a-f]{2})(?:-[0-9a-f]{2})?\])?`)
)

// tvNode is what a drawn node stands for: the bus its children are on,
// and the chain (host bridge, then bridges) down to that bus.
type tvNode struct {
	domain, bus string
	chain       gpu.Chain
}

// parseLspciTree reads lspci -tv's drawing (pciutils ls-tree.c) into the
// chain of every function: PCI address -> host bridge and the bridges
// from its root port down to the function's parent. The drawing is
// ASCII art, read by column: a node's children are either drawn on its
// own line right after it ("01.0-[16-1c]----00.0") or, from the second
// on, below the first one, starting in the same column ("+-01.0",
// "\-1f.0", with "|" in that column between them). So each node knows its
// parent from the node to its left on the same line or, first on its
// line, from the node first drawn in its column. A function's name runs
// from two spaces after it to the end of the line and is not parsed (a
// name may hold anything, "4.0" included). A bridge whose secondary bus
// is drawn is a parent; a node whose parent cannot be told is an error,
// never a guess.
func parseLspciTree(out string) (map[string]gpu.Chain, error) {
	res := map[string]gpu.Chain{}
	// parentAt[col]: the parent of the nodes drawn starting in column col.
	parentAt := map[int]*tvNode{}
	top := &tvNode{}
	for ln, line := range strings.Split(out, "\n") {
		var left *tvNode // the node drawn before on this line
		for col := 0; col < len(line); {
			rest := line[col:]
			if left != nil && strings.HasPrefix(rest, "  ") {
				break // the name of the function drawn last
			}
			if strings.ContainsRune(`-+\| `, rune(rest[0])) {
				col++
				continue
			}
			parent := left
			if parent == nil {
				p, ok := parentAt[col]
				switch {
				case ok:
					parent = p
				case tvRoot.MatchString(rest):
					parent = top // the first root bus
				default:
					return nil, fmt.Errorf("line %d column %d: %q is below no node drawn above", ln+1, col+1, rest)
				}
			}
			if _, ok := parentAt[col]; left != nil || !ok {
				// A first child, drawn right of its parent (or the first
				// root bus): its later siblings start in its column on
				// the lines below.
				parentAt[col] = parent
			}
			var node *tvNode
			if m := tvRoot.FindStringSubmatch(rest); m != nil {
				if parent != top {
					return nil, fmt.Errorf("line %d: root bus %s below a function", ln+1, m[0])
				}
				node = &tvNode{domain: m[1], bus: m[2], chain: gpu.Chain{Root: "pci" + m[1] + ":" + m[2]}}
				col += len(m[0])
			} else if m := tvFunc.FindStringSubmatch(rest); m != nil {
				if parent == top || parent.bus == "" {
					return nil, fmt.Errorf("line %d: function %s below a bridge with no bus drawn", ln+1, m[0])
				}
				addr := parent.domain + ":" + parent.bus + ":" + m[1] + "." + m[2]
				if _, dup := res[addr]; dup {
					return nil, fmt.Errorf("line %d: %s drawn twice", ln+1, addr)
				}
				res[addr] = gpu.Chain{Root: parent.chain.Root, Bridges: slices.Clone(parent.chain.Bridges)}
				node = &tvNode{domain: parent.domain}
				if m[3] != "" {
					node.bus = m[3]
					node.chain = gpu.Chain{Root: parent.chain.Root, Bridges: append(slices.Clone(parent.chain.Bridges), addr)}
				}
				col += len(m[0])
			} else {
				return nil, fmt.Errorf("line %d column %d: cannot read %q", ln+1, col+1, rest)
			}
			left = node
		}
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("no function in the tree")
	}
	return res, nil
}

// The parser on drawings lspci printed: the deep NVMe tree of the
// recorded EPYC host (four levels of switches, siblings in one column below
// a first child drawn further right), root buses of their own, a bridge
// with nothing below it, names with digits, dots and brackets; and on
// drawings it must refuse rather than guess.
func TestParseLspciTree(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "fixtures", "recorded", recordedTree["epyc-genoa"]))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := parseLspciTree(recordedLspciTree(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]string{
		"0000:01:00.0": "pci0000:00/0000:00:01.1",
		"0000:01:00.1": "pci0000:00/0000:00:01.1",
		"0000:00:18.7": "pci0000:00",
		"0000:21:00.1": "pci0000:20/0000:20:03.1",
		"0000:65:00.0": "pci0000:60/0000:60:01.1/0000:61:00.0/0000:62:00.0/0000:63:00.0/0000:64:10.0",
		"0000:68:00.0": "pci0000:60/0000:60:01.1/0000:61:00.0/0000:62:00.0/0000:63:00.0/0000:64:1c.0",
		"0000:6c:00.0": "pci0000:60/0000:60:01.1/0000:61:00.0/0000:62:04.0/0000:69:00.0/0000:6a:04.0",
		"0000:e1:00.0": "pci0000:e0/0000:e0:01.1",
	} {
		if got, ok := tree[addr]; !ok || chainString(got) != want {
			t.Errorf("%s: %s (found %v), want %s", addr, chainString(got), ok, want)
		}
	}
	// lspci's single-domain form (no -D, one root bus) and a bridge
	// with no children.
	one, err := parseLspciTree("-[0000:00]-+-00.0  Intel Corporation 440FX - 82441FX PMC [Natoma]\n" +
		"           +-01.0-[01-02]----00.0-[02]--\n" +
		"           \\-1f.3  Intel Corporation Device 4.0 [a0:1f.3]\n")
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]string{
		"0000:00:00.0": "pci0000:00", "0000:00:01.0": "pci0000:00", "0000:01:00.0": "pci0000:00/0000:00:01.0",
		"0000:00:1f.3": "pci0000:00",
	} {
		if got, ok := one[addr]; !ok || chainString(got) != want {
			t.Errorf("%s: %s (found %v), want %s", addr, chainString(got), ok, want)
		}
	}
	if len(one) != 4 {
		t.Errorf("%d functions, want 4: %v", len(one), one)
	}
	for _, bad := range []string{
		"",
		"garbage\n",
		"-[0000:00]-+-00.0  A\n                 +-01.0  B\n", // a sibling in a column no first child opened
		"-[0000:00]-+-00.0  A\n           +-00.0  A\n",       // drawn twice
		"-[0000:00]-+-00.0-[01]--\n             +-zz.0\n",
	} {
		if got, err := parseLspciTree(bad); err == nil {
			t.Errorf("%q: no error, parsed %v", bad, got)
		}
	}
}
