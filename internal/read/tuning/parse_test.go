// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package tuning

import (
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestParseSysctl(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int64
		err  bool
	}{
		{"262144\n", []int64{262144}, false},
		{"4096\t131072\t6291456\n", []int64{4096, 131072, 6291456}, false},
		{"-1\n", []int64{-1}, false},
		{"0", []int64{0}, false},
		{"", nil, true},
		{"\n", nil, true},
		{"lots\n", nil, true},
		{"1 x\n", nil, true},
		{"99999999999999999999\n", nil, true},
	} {
		got, err := ParseSysctl(tc.in)
		if (err != nil) != tc.err || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseSysctl(%q) = %v, %v; want %v, err %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestParseSelected(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		opts     int
		err      bool
	}{
		{"always [madvise] never\n", "madvise", 3, false},
		{"[always] madvise never\n", "always", 3, false},
		{"always defer defer+madvise [madvise] never\n", "madvise", 5, false},
		{"[never]", "never", 1, false},
		{"always madvise never\n", "", 0, true},
		{"[always] [never]\n", "", 0, true},
		{"always [madvise never\n", "", 0, true},
		{"[]\n", "", 0, true},
		{"", "", 0, true},
	} {
		got, opts, err := ParseSelected(tc.in)
		if (err != nil) != tc.err || got != tc.want || len(opts) != tc.opts {
			t.Errorf("ParseSelected(%q) = %q, %q, %v; want %q (%d options), err %v", tc.in, got, opts, err, tc.want, tc.opts, tc.err)
		}
	}
}

func TestParseHugepageSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		err  bool
	}{
		{"hugepages-2048kB", 2 << 20, false},
		{"hugepages-1048576kB", 1 << 30, false},
		{"hugepages-64kB", 64 << 10, false},
		{"hugepages-0kB", 0, true},
		{"hugepages-2048", 0, true},
		{"hugepages-kB", 0, true},
		{"nr_hugepages", 0, true},
		{"hugepages-99999999999999999999kB", 0, true},
	} {
		got, err := ParseHugepageSize(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseHugepageSize(%q) = %d, %v; want %d, err %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestParseModules(t *testing.T) {
	in := "mlx5_ib 495616 0 - Live 0x0000000000000000\n" +
		"ib_core 462848 8 mlx5_ib,ib_uverbs, Live 0xffffffffc0a9e000\n" +
		"nvidia_peermem 16384 0 - Live 0x0000000000000000 (POE)\n" +
		"rdma_rxe 139264 - - Loading 0x0000000000000000\n" +
		"mlx5_ib 4628" // torn
	mods, err := ParseModules(in)
	if err == nil || !strings.Contains(err.Error(), "line 5") {
		t.Errorf("torn line: err %v, want one naming line 5", err)
	}
	want := []Module{
		{"mlx5_ib", 495616, 0, "Live"},
		{"ib_core", 462848, 8, "Live"},
		{"nvidia_peermem", 16384, 0, "Live"},
		{"rdma_rxe", 139264, -1, "Loading"},
	}
	if !reflect.DeepEqual(mods, want) {
		t.Errorf("modules = %+v\nwant %+v", mods, want)
	}
	for _, bad := range []string{"x 1 0 - Dead 0x0", "x big 0 - Live 0x0", "x 1 -3 - Live 0x0", "x 1 0 -"} {
		if m, err := ParseModules(bad); err == nil || len(m) != 0 {
			t.Errorf("ParseModules(%q) = %v, %v; want an error and nothing", bad, m, err)
		}
	}
	if m, err := ParseModules(""); err != nil || len(m) != 0 {
		t.Errorf("empty: %v, %v", m, err)
	}
}

func TestParseLimits(t *testing.T) {
	b, err := os.ReadFile("../../../fixtures/hosts/dgx-h100/proc/self/limits")
	if err != nil {
		t.Fatal(err)
	}
	limits, err := ParseLimits(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(limits) != 16 {
		t.Errorf("%d rows, want 16", len(limits))
	}
	got := map[string]Limit{}
	for _, l := range limits {
		got[l.Name] = l
	}
	for _, want := range []Limit{
		{"Max locked memory", 8388608, 8388608, "bytes"},
		{"Max cpu time", Unlimited, Unlimited, "seconds"},
		{"Max stack size", 8388608, Unlimited, "bytes"},
		{"Max nice priority", 0, 0, ""},
		{"Max realtime timeout", Unlimited, Unlimited, "us"},
	} {
		if got[want.Name] != want {
			t.Errorf("%s = %+v, want %+v", want.Name, got[want.Name], want)
		}
	}
	for _, tc := range []struct{ in, err string }{
		{"", "header"},
		{"Max locked memory 1 1 bytes\n", "header"},
		{"Limit  Soft Limit  Hard Limit  Units\nMax locked memory         6553", "Max locked memory"},
		{"Limit  Soft Limit  Hard Limit  Units\nMax locked memory 1 x bytes\n", "bad hard limit"},
		{"Limit  Soft Limit  Hard Limit  Units\n64 64 bytes\n", "want <name>"},
	} {
		if _, err := ParseLimits(tc.in); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParseLimits(%q): err %v, want %q", tc.in, err, tc.err)
		}
	}
}

func TestParseRDMAMax(t *testing.T) {
	got, err := ParseRDMAMax("mlx5_0 hca_handle=2 hca_object=2000\nocrdma1 hca_handle=3 hca_object=max\nmlx4_0 hca_handle=max hca_object=max\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []RDMALimit{{"mlx5_0", 2, 2000}, {"ocrdma1", 3, Unlimited}, {"mlx4_0", Unlimited, Unlimited}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if !got[1].Limited() || got[2].Limited() {
		t.Error("Limited: want true for a finite handle limit, false for all max")
	}
	// The guide's "mlx5_0 50" is not the kernel's format.
	for _, bad := range []string{"mlx5_0 50\n", "mlx5_0 hca_handle=lots hca_object=max\n", "mlx5_0 hca_handle=1\n",
		"mlx5_0 hca_handle=1 hca_object=1 qp=lots\n", "mlx5_0 hca_handle=1 hca_handle=1\n", "mlx5_0 hca_obj=1 hca_handle=1\n",
		"hca_handle=1 hca_handle=1 hca_object=1\n", "mlx5_0 hca_handle=1 hca_object=1 =2\n"} {
		if l, err := ParseRDMAMax(bad); err == nil || len(l) != 0 {
			t.Errorf("ParseRDMAMax(%q) = %v, %v; want an error", bad, l, err)
		}
	}
	// A resource a newer kernel adds (qp, mr) does not hide the two known.
	if l, err := ParseRDMAMax("mlx5_0 hca_handle=2 hca_object=max qp=100 mr=max\n"); err != nil || len(l) != 1 || l[0] != (RDMALimit{"mlx5_0", 2, Unlimited}) {
		t.Errorf("newer kernel line: %v, %v", l, err)
	}
	// One bad line does not hide the good ones.
	if l, err := ParseRDMAMax("mlx5_0 hca_handle=lots hca_object=max\nmlx5_1 hca_handle=2 hca_object=100\n"); err == nil || len(l) != 1 || l[0].Device != "mlx5_1" {
		t.Errorf("mixed: %v, %v", l, err)
	}
}

// FormatRDMALimit writes what ParseRDMAMax reads, in the kernel's form.
func TestFormatRDMALimit(t *testing.T) {
	for _, l := range []RDMALimit{{"mlx5_0", 8, 65536}, {"mlx5_bond_0", Unlimited, Unlimited}, {"irdma0", 0, RDMACgroupMax}} {
		line := FormatRDMALimit(l)
		got, err := ParseRDMAMax(line + "\n")
		if err != nil || len(got) != 1 || got[0] != l {
			t.Errorf("FormatRDMALimit(%+v) = %q, parsed back %v, %v", l, line, got, err)
		}
	}
	if got := FormatRDMALimit(RDMALimit{"mlx5_0", 8, Unlimited}); got != "mlx5_0 hca_handle=8 hca_object=max" {
		t.Errorf("got %q", got)
	}
}

func TestParseSELinuxEnforce(t *testing.T) {
	for in, want := range map[string]string{"1\n": "enforcing", "0": "permissive", "2\n": "", "": ""} {
		got, err := ParseSELinuxEnforce(in)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("ParseSELinuxEnforce(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestParseWord(t *testing.T) {
	for in, want := range map[string]string{"performance\n": "performance", " powersave ": "powersave", "5.15.0-1042-nvidia\n": "5.15.0-1042-nvidia",
		"": "", "\n": "", "two words\n": "", "a\x00b": "", "bad\xff": ""} {
		got, err := ParseWord(in)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("ParseWord(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// seeds adds every fixture file matching pattern (relative to a host root)
// to a fuzz corpus.
func seeds(f *testing.F, pattern string) { hostfstest.Seeds(f, "*/"+pattern) }

func FuzzParseSysctl(f *testing.F) {
	seeds(f, "proc/sys/*/*")
	seeds(f, "proc/sys/*/*/*")
	f.Add("4096\t131072\t6291456\n")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSysctl(s)
		if err == nil && len(v) != len(strings.Fields(s)) {
			t.Errorf("%q: %d values from %d fields", s, len(v), len(strings.Fields(s)))
		}
	})
}

func FuzzParseSelected(f *testing.F) {
	seeds(f, "sys/kernel/mm/transparent_hugepage/*")
	f.Fuzz(func(t *testing.T, s string) {
		sel, opts, err := ParseSelected(s)
		if err != nil {
			return
		}
		found := false
		for _, o := range opts {
			found = found || o == sel
			if strings.ContainsAny(o, "[] \t\n") {
				t.Errorf("%q: option %q keeps brackets or blanks", s, o)
			}
		}
		if !found || sel == "" {
			t.Errorf("%q: selected %q not among %q", s, sel, opts)
		}
	})
}

func FuzzParseHugepageSize(f *testing.F) {
	f.Add("hugepages-2048kB")
	f.Add("hugepages-1048576kB")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseHugepageSize(s)
		if err == nil && (v == 0 || v%1024 != 0) {
			t.Errorf("%q: %d bytes", s, v)
		}
	})
}

func FuzzParseModules(f *testing.F) {
	seeds(f, "proc/modules")
	f.Fuzz(func(t *testing.T, s string) {
		mods, _ := ParseModules(s)
		if len(mods) > strings.Count(s, "\n")+1 {
			t.Errorf("%d modules from %d lines", len(mods), strings.Count(s, "\n")+1)
		}
		for _, m := range mods {
			if m.Name == "" || m.RefCount < -1 {
				t.Errorf("bad module %+v", m)
			}
		}
	})
}

func FuzzParseLimits(f *testing.F) {
	seeds(f, "proc/*/limits")
	f.Fuzz(func(t *testing.T, s string) {
		limits, _ := ParseLimits(s)
		for _, l := range limits {
			if l.Name == "" || strings.Contains(l.Name, "  ") {
				t.Errorf("bad row name %q", l.Name)
			}
		}
	})
}

func FuzzParseRDMAMax(f *testing.F) {
	seeds(f, "sys/fs/cgroup/*/rdma.max")
	seeds(f, "sys/fs/cgroup/*/*/rdma.max")
	f.Fuzz(func(t *testing.T, s string) {
		limits, _ := ParseRDMAMax(s)
		for _, l := range limits {
			if l.Device == "" || strings.ContainsAny(l.Device, " \t\n") {
				t.Errorf("bad device %q", l.Device)
			}
		}
	})
}

func FuzzParseWord(f *testing.F) {
	seeds(f, "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
	seeds(f, "proc/sys/kernel/osrelease")
	f.Fuzz(func(t *testing.T, s string) {
		w, err := ParseWord(s)
		if err == nil && (w == "" || strings.ContainsAny(w, " \t\n")) {
			t.Errorf("%q: word %q", s, w)
		}
	})
}
