// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

func tool(t testing.TB, name string) []byte { return hostfstest.Tool(t, name) }

func parse(t testing.TB, b []byte) *Fabric {
	t.Helper()
	f, err := Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func findLink(f *Fabric, aDesc string, aPort int) *Link {
	for i := range f.Links {
		l := &f.Links[i]
		if l.A.Desc == aDesc && l.A.Port == aPort {
			return l
		}
	}
	return nil
}

// TestGeneratedHDRFabricFindsDowngrade: the guide's "switch port set to
// FDR" case on an HDR fabric, and a link trained at 2X.
func TestGeneratedHDRFabricFindsDowngrade(t *testing.T) {
	f := parse(t, tool(t, "iblinkinfo-l-generated-hdr-fdr-downgrade.txt"))
	if f.Malformed != 0 {
		t.Errorf("malformed lines %v", f.MalformedLines)
	}
	if got, want := len(f.Links), 8; got != want {
		t.Errorf("links = %d, want %d (each printed from both ends, kept once)", got, want)
	}
	if f.Switches != 3 || f.CAs != 4 || f.CAPorts != 4 {
		t.Errorf("switches %d CAs %d CA ports %d, want 3 4 4", f.Switches, f.CAs, f.CAPorts)
	}
	if f.Ports != 24 || f.DownPorts != 8 {
		t.Errorf("ports %d down %d, want 24 8", f.Ports, f.DownPorts)
	}
	if got := f.Degraded(); got != 2 {
		t.Errorf("degraded = %d, want 2", got)
	}
	fdr := findLink(f, "MF0;leaf2:MQM8700/U1", 1)
	if fdr == nil {
		t.Fatal("leaf2 port 1 link missing")
	}
	if fdr.B.Desc != "gpu03 mlx5_0" || fdr.B.GUIDString() != "0xb83fd20300a41f60" || fdr.B.LID != 12 || fdr.B.Port != 1 {
		t.Errorf("remote end = %+v", fdr.B)
	}
	if fdr.Speed != "FDR" || fdr.Width != 4 || fdr.CouldBeSpeed != "53.125 Gbps" || fdr.CouldBeWidth != "" || !fdr.Degraded() {
		t.Errorf("FDR link = %+v", fdr)
	}
	if r, ok := fdr.Rate(); !ok || r.Gbps != 56 {
		t.Errorf("FDR link rate = %v %v, want 56 Gb/s", r, ok)
	}
	narrow := findLink(f, "MF0;leaf2:MQM8700/U1", 2)
	if narrow == nil || narrow.Width != 2 || narrow.CouldBeWidth != "4X" || narrow.CouldBeSpeed != "" {
		t.Errorf("2X link = %+v", narrow)
	}
	up := findLink(f, "MF0;spine1:MQM8700/U1", 1)
	if up == nil || up.Degraded() || up.Speed != "HDR" || up.State != infiniband.StateActive || up.PhysState != "LinkUp" {
		t.Errorf("spine uplink = %+v", up)
	}
	// Switch-to-switch links are oriented lower GUID first.
	if up.B.Desc != "MF0;leaf1:MQM8700/U1" || up.B.Port != 39 {
		t.Errorf("spine uplink remote = %+v", up.B)
	}
}

// TestIbsimRecording: real iblinkinfo 44.0 output on an ibsim fabric.
// ibsim advertises 12X and HDR as supported on every port, so iblinkinfo
// hints "Could be 12X Could be 53.125 Gbps" on every link.
func TestIbsimRecording(t *testing.T) {
	f := parse(t, tool(t, "iblinkinfo-l-ibsim.txt"))
	if f.Malformed != 0 {
		t.Errorf("malformed lines %v", f.MalformedLines)
	}
	if len(f.Links) != 8 || f.Switches != 3 || f.CAs != 4 {
		t.Errorf("got %s, want 8 links, 3 switches, 4 CAs", f.Describe())
	}
	if f.Ports != 112 || f.DownPorts != 112-16 {
		t.Errorf("ports %d down %d", f.Ports, f.DownPorts)
	}
	if f.Degraded() != 8 {
		t.Errorf("degraded = %d, want 8 (ibsim hints on every link)", f.Degraded())
	}
	l := findLink(f, "leaf2", 1)
	if l == nil || l.Speed != "FDR" || l.B.Desc != "node03 mlx5_0" || l.B.LID != 6 || l.CouldBeWidth != "12X" || l.CouldBeSpeed != "53.125 Gbps" {
		t.Errorf("leaf2/1 = %+v", l)
	}
	l = findLink(f, "leaf2", 2)
	if l == nil || l.Width != 2 || l.Speed != "EDR" {
		t.Errorf("leaf2/2 = %+v", l)
	}
}

func TestDefaultModeRejected(t *testing.T) {
	for _, name := range []string{"iblinkinfo-ibsim.txt", "iblinkinfo-sb7700-edr-linpack.txt"} {
		if _, err := Parse(bytes.NewReader(tool(t, name))); !errors.Is(err, ErrNotLineMode) {
			t.Errorf("%s: err = %v, want ErrNotLineMode", name, err)
		}
	}
}

func TestLines(t *testing.T) {
	const up = `0x0000000000100005 "                 node03 mlx5_0"      6    1[  ] ==( 4X       14.0625 Gbps Active/  LinkUp)==>  0x0000000000200002      3    1[  ] "leaf2" (Could be 12X Could be 53.125 Gbps)`
	tests := []struct {
		name                    string
		in                      string
		links, malformed, ports int
		check                   func(t *testing.T, f *Fabric)
	}{
		{name: "active", in: up, links: 1, ports: 1},
		{name: "down", in: `0x0000000000200002 "                         leaf2"      3    4[  ] ==(                Down/ Polling)==>             [  ] "" ( )`, ports: 1,
			check: func(t *testing.T, f *Fabric) {
				if f.DownPorts != 1 {
					t.Errorf("down = %d", f.DownPorts)
				}
			}},
		{name: "port not available", in: `0x0000000000200002 "leaf2"      3    4[  ] ==( 4X      25.78125 Gbps Active/  LinkUp)==>      "Port not available"`, ports: 1},
		{name: "initialize, FDR10, extended port, quotes in desc",
			in:    `0x0000000000100005 "host "a" HCA-1"     12    1[ 2] ==( 4X  10.0 Gbps (FDR10) Initialize/  LinkUp)==>  0x0000000000200002      3   17[ 3] "sw "x" (y)" ( )`,
			links: 1, ports: 1,
			check: func(t *testing.T, f *Fabric) {
				l := f.Links[0]
				if l.Speed != "FDR10" || l.State != infiniband.StateInit || l.A.Desc != `host "a" HCA-1` || l.B.Desc != `sw "x" (y)` || l.B.Port != 17 || l.Degraded() {
					t.Errorf("link = %+v", l)
				}
			}},
		{name: "unknown speed kept, no rate", in: strings.Replace(up, "14.0625 Gbps", "undefined (64)", 1), links: 1, ports: 1,
			check: func(t *testing.T, f *Fabric) {
				if _, ok := f.Links[0].Rate(); ok || f.Links[0].Speed != "" {
					t.Errorf("link = %+v", f.Links[0])
				}
			}},
		{name: "both ends once", in: up + "\n" + `0x0000000000200002 "                         leaf2"      3    1[  ] ==( 4X       14.0625 Gbps Active/  LinkUp)==>  0x0000000000100005      6    1[  ] "node03 mlx5_0" (Could be 12X Could be 53.125 Gbps)`,
			links: 1, ports: 2},
		{name: "garbage lines skipped and counted", in: "garbage\n" + up + "\n0xzz \"a\" 1 1[ ] ==( 4X 2.5 Gbps Active/ LinkUp)==> x\n\n" +
			strings.Replace(up, "4X", "3X", 1) + "\n" + strings.Replace(up, "Active", "Bogus", 1) + "\n" + up[:60],
			links: 1, ports: 1, malformed: 5},
		{name: "empty", in: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := parse(t, []byte(tt.in))
			if len(f.Links) != tt.links || f.Malformed != tt.malformed || f.Ports != tt.ports {
				t.Errorf("links %d malformed %d (%v) ports %d, want %d %d %d", len(f.Links), f.Malformed, f.MalformedLines, f.Ports, tt.links, tt.malformed, tt.ports)
			}
			if tt.check != nil {
				tt.check(t, f)
			}
		})
	}
}

func TestArgs(t *testing.T) {
	if got := fmt.Sprint(Args("", 0)); got != "[--line]" {
		t.Errorf("Args = %s", got)
	}
	if got := fmt.Sprint(Args("mlx5_0", 1)); got != "[--line -C mlx5_0 -P 1]" {
		t.Errorf("Args = %s", got)
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"iblinkinfo-l-ibsim.txt", "iblinkinfo-l-generated-hdr-fdr-downgrade.txt", "iblinkinfo-ibsim.txt"} {
		f.Add(tool(f, name))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fab, err := Parse(bytes.NewReader(b))
		if err != nil {
			return
		}
		if fab.Ports < fab.DownPorts || fab.Malformed < len(fab.MalformedLines) {
			t.Fatalf("inconsistent counts %+v", fab)
		}
		for _, l := range fab.Links {
			if !validWidth(l.Width) {
				t.Fatalf("width %d", l.Width)
			}
		}
	})
}

func validWidth(w int) bool { return w == 1 || w == 2 || w == 4 || w == 8 || w == 12 }

// generate writes iblinkinfo --line output of a two-tier fabric with
// switches switches and links links (each printed from both ends), every
// switch with 40 ports, the unused ones Down.
func generate(switches, links int) []byte {
	var b bytes.Buffer
	b.Grow(links * 2 * 200)
	const ports = 40
	type end struct {
		guid uint64
		lid  int
		port int
		desc string
	}
	swGUID := func(i int) uint64 { return 0x1070fd0300000000 + uint64(i)<<8 }
	swDesc := func(i int) string { return fmt.Sprintf("MF0;sw%04d:MQM9700/U1", i) }
	used := make([][]bool, switches)
	for i := range used {
		used[i] = make([]bool, ports+1)
	}
	line := func(a, z end, width, speed, hint string) {
		fmt.Fprintf(&b, "0x%016x \"%30s\" %6d %4d[%2s] ==(%3s %18s %6s/%8s)==>  0x%016x %6d %4d[%2s] \"%s\" (%s)\n",
			a.guid, a.desc, a.lid, a.port, "", width, speed, "Active", "LinkUp", z.guid, z.lid, z.port, "", z.desc, hint)
	}
	// Half the links go from leaf switches to HCAs, half between switches.
	n := 0
	ca := 0
	for s := 0; n < links/2 && s < switches; s++ {
		for p := 1; p <= ports/2 && n < links/2; p++ {
			ca++
			sw := end{swGUID(s), s + 1, p, swDesc(s)}
			h := end{0xb83fd20300000000 + uint64(ca), 10000 + ca, 1, fmt.Sprintf("node%05d mlx5_0", ca)}
			hint := " "
			if ca%997 == 0 {
				hint = "Could be 4X "
			}
			line(sw, h, "4X", "106.25 Gbps", hint)
			line(h, sw, "4X", "106.25 Gbps", hint)
			used[s][p] = true
			n++
		}
	}
	// Uplinks: the upper half of every switch's ports, port-major, paired
	// with the next one (always another switch).
	var free []end
	for p := ports/2 + 1; p <= ports; p++ {
		for s := 0; s < switches; s++ {
			free = append(free, end{swGUID(s), s + 1, p, swDesc(s)})
		}
	}
	for i := 0; n < links && i+1 < len(free); i += 2 {
		a, z := free[i], free[i+1]
		line(a, z, "4X", "106.25 Gbps", " ")
		line(z, a, "4X", "106.25 Gbps", " ")
		used[a.lid-1][a.port], used[z.lid-1][z.port] = true, true
		n++
	}
	for s := 0; s < switches; s++ {
		for p := 1; p <= ports; p++ {
			if !used[s][p] {
				fmt.Fprintf(&b, "0x%016x \"%30s\" %6d %4d[%2s] ==(              %6s/%8s)==>             [  ] \"\" ( )\n",
					swGUID(s), swDesc(s), s+1, p, "", "Down", "Polling")
			}
		}
	}
	return b.Bytes()
}

func TestGenerated(t *testing.T) {
	f := parse(t, generate(50, 1000))
	if len(f.Links) != 1000 || f.Malformed != 0 || f.Switches != 50 || f.CAs != 500 || f.Degraded() != 0 {
		t.Errorf("got %s", f.Describe())
	}
}

// BenchmarkParseIblinkinfo parses a generated 2,000-switch, 40,000-link
// fabric (80,000 link lines plus the Down ports).
func BenchmarkParseIblinkinfo(b *testing.B) {
	in := generate(2000, 40000)
	f, err := Parse(bytes.NewReader(in))
	if err != nil || len(f.Links) != 40000 || f.Switches != 2000 {
		b.Fatalf("generator: %v %s", err, f.Describe())
	}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Parse(bytes.NewReader(in)); err != nil {
			b.Fatal(err)
		}
	}
}
