// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package cpulist

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in      string
		cpus    []int
		str     string
		wantErr bool
	}{
		{in: "0-15,32-47\n", cpus: append(seq(0, 15), seq(32, 47)...), str: "0-15,32-47"},
		{in: "0", cpus: []int{0}, str: "0"},
		{in: "7-11", cpus: seq(7, 11), str: "7-11"},
		{in: "3-4", cpus: []int{3, 4}, str: "3-4"},
		{in: "0-3,8", cpus: []int{0, 1, 2, 3, 8}, str: "0-3,8"},
		{in: "5,1,3", cpus: []int{1, 3, 5}, str: "1,3,5"}, // kernel never prints this; accepted, normalised
		{in: "0-63", cpus: seq(0, 63), str: "0-63"},       // exactly one word
		{in: "60-130", cpus: seq(60, 130), str: "60-130"}, // crosses words
		{in: "0-55,112-167", cpus: append(seq(0, 55), seq(112, 167)...), str: "0-55,112-167"},
		{in: "", cpus: []int{}, str: ""},
		{in: "\n", cpus: []int{}, str: ""},
		{in: "8-15,24-31", cpus: append(seq(8, 15), seq(24, 31)...), str: "8-15,24-31"},
		{in: "3-1", wantErr: true},
		{in: "a", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "+1", wantErr: true},
		{in: "1,", wantErr: true},
		{in: ",1", wantErr: true},
		{in: "1-", wantErr: true},
		{in: "1--3", wantErr: true},
		{in: "0-65536", wantErr: true},
		{in: "99999999999999999999", wantErr: true},
		{in: "00000000,0000ffff", wantErr: true}, // a local_cpus mask is another format
		{in: "0-3:2/4", wantErr: true},           // kernel input syntax, never printed
	} {
		s, err := Parse(tc.in)
		if tc.wantErr {
			if err == nil {
				t.Errorf("Parse(%q) = %v, want error", tc.in, s)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if got := s.CPUs(); !slices.Equal(got, tc.cpus) {
			t.Errorf("Parse(%q).CPUs() = %v, want %v", tc.in, got, tc.cpus)
		}
		if got := s.String(); got != tc.str {
			t.Errorf("Parse(%q).String() = %q, want %q", tc.in, got, tc.str)
		}
		if s.Len() != len(tc.cpus) {
			t.Errorf("Parse(%q).Len() = %d, want %d", tc.in, s.Len(), len(tc.cpus))
		}
	}
}

func seq(a, b int) []int {
	var out []int
	for i := a; i <= b; i++ {
		out = append(out, i)
	}
	return out
}

func TestSetOps(t *testing.T) {
	local := mustParse(t, "16-31,48-63")
	for _, tc := range []struct {
		aff             string
		subset          bool
		outside         string
		containsSixteen bool
	}{
		{aff: "16", subset: true, outside: "", containsSixteen: true},
		{aff: "0", subset: false, outside: "0"},
		{aff: "0-63", subset: false, outside: "0-15,32-47", containsSixteen: true},
		{aff: "", subset: true, outside: ""},
		{aff: "200", subset: false, outside: "200"}, // beyond local's words
	} {
		a := mustParse(t, tc.aff)
		if got := a.SubsetOf(local); got != tc.subset {
			t.Errorf("%q SubsetOf %v = %v", tc.aff, local, got)
		}
		if got := a.Minus(local).String(); got != tc.outside {
			t.Errorf("%q Minus local = %q, want %q", tc.aff, got, tc.outside)
		}
		if got := a.Contains(16); got != tc.containsSixteen {
			t.Errorf("%q Contains(16) = %v", tc.aff, got)
		}
	}
	var u Set
	u.AddSet(Of(3))
	u.AddSet(mustParse(t, "100-101"))
	u.Add(3)
	u.Add(-1)
	u.Add(MaxCPU)
	if got := u.String(); got != "3,100-101" {
		t.Errorf("union = %q", got)
	}
	if !u.Equal(Of(101, 100, 3)) || u.Equal(Of(3)) {
		t.Error("Equal is wrong")
	}
	if !(Set{}).Empty() || Of(0).Empty() {
		t.Error("Empty is wrong")
	}
	if (Set{}).Contains(0) || Of(1).Contains(-1) {
		t.Error("Contains on missing CPUs")
	}
}

func mustParse(t testing.TB, s string) Set {
	t.Helper()
	set, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// FuzzParse: whatever parses prints back to a list that parses to the same
// set, and the printed form is stable.
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{
		"../../../fixtures/hosts/*/sys/devices/system/node/node*/cpulist",
		"../../../fixtures/hosts/*/sys/devices/system/cpu/online",
		"../../../fixtures/hosts/*/proc/irq/*/smp_affinity_list",
		"../../../fixtures/hosts/*/proc/irq/*/effective_affinity_list",
	} {
		files, _ := filepath.Glob(pattern)
		for i, p := range files {
			if i >= 50 {
				break
			}
			if b, err := os.ReadFile(p); err == nil {
				f.Add(string(b))
			}
		}
	}
	for _, s := range []string{"0-15,32-47", "7-11", "", "1,3,5", "0-65535", "3-1", "1--2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := Parse(in)
		if err != nil {
			return
		}
		str := s.String()
		back, err := Parse(str)
		if err != nil {
			t.Fatalf("Parse(%q) printed %q, which does not parse: %v", in, str, err)
		}
		if !back.Equal(s) || back.String() != str {
			t.Fatalf("round trip of %q: %q then %q", in, str, back.String())
		}
		if back.Len() != len(s.CPUs()) {
			t.Fatalf("Len %d, CPUs %d", back.Len(), len(s.CPUs()))
		}
	})
}
