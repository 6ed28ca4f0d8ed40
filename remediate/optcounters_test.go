// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/rdmanl"
	"golang.org/x/sys/unix"
)

// fakeCounters is the kernel's optional counters as the remediate side
// sees them: per port the counters offered and those enabled, a set
// replacing the whole enabled set (nldev_stat_set_counter_dynamic_doit),
// a name the port does not offer refused with nothing changed. The
// counter names are the mlx5 driver's (drivers/infiniband/hw/mlx5/
// counters.c); which port offers what is the test's choice, there being
// no recorded `rdma statistic mode supported` of the roce-cx6dx host.
type fakeCounters struct {
	offered map[string][]string
	enabled map[string][]string
	// unsupported ports answer EOPNOTSUPP, as a kernel without
	// RDMA_NLDEV_CMD_STAT_GET_STATUS does.
	unsupported map[string]bool
	sets        int
}

func (f *fakeCounters) Status(dev string, port uint32) (rdmanl.PortStatus, error) {
	k := countersPath(dev, port)
	if f.unsupported[k] {
		return rdmanl.PortStatus{}, unix.EOPNOTSUPP
	}
	off, ok := f.offered[k]
	if !ok {
		return rdmanl.PortStatus{}, fmt.Errorf("%s: %w", k, rdmanl.ErrNoDevice)
	}
	st := rdmanl.PortStatus{Device: dev, Port: port, Counters: []rdmanl.CounterStatus{{Name: "out_of_buffer"}}}
	for _, n := range off {
		st.Counters = append(st.Counters, rdmanl.CounterStatus{Name: n, Optional: true, Enabled: slices.Contains(f.enabled[k], n)})
	}
	return st, nil
}

func (f *fakeCounters) Set(dev string, port uint32, names []string) error {
	k := countersPath(dev, port)
	off, ok := f.offered[k]
	if !ok {
		return fmt.Errorf("%s: %w", k, rdmanl.ErrNoDevice)
	}
	for _, n := range names {
		if !slices.Contains(off, n) {
			return fmt.Errorf("%s: %q: %w", k, n, rdmanl.ErrNotOptional)
		}
	}
	f.sets++
	f.enabled[k] = sortedCopy(names)
	return nil
}

func (f *fakeCounters) state() map[string][]string {
	m := map[string][]string{}
	for k, v := range f.enabled {
		m[k] = slices.Clone(v)
	}
	return m
}

var mlx5Optional = []string{"cc_rx_ce_pkts", "cc_rx_cnp_pkts", "cc_tx_cnp_pkts"}

// roceKernel: mlx5_0/1 offers the three congestion counters and has
// cc_rx_cnp_pkts on (not asked: the union keeps it); mlx5_1/1 offers
// none of them.
func roceKernel() *fakeCounters {
	return &fakeCounters{
		offered: map[string][]string{"mlx5_0/1": mlx5Optional, "mlx5_1/1": {}},
		enabled: map[string][]string{"mlx5_0/1": {"cc_rx_cnp_pkts"}, "mlx5_1/1": nil},
	}
}

func countersConfig(names ...string) *config.Config {
	return &config.Config{Tuning: config.Tuning{OptionalCounters: names}}
}

func optPlan(t *testing.T, root string, w DirWriter, cfg *config.Config) *ActionPlan {
	t.Helper()
	in := inputWith(t, root, w, cfg)
	if w.Counters != nil {
		in.Counters = w.Counters
	}
	p := MakePlan(in, []Action{optionalCountersAction{}})
	if len(p.Actions) != 1 || p.Actions[0].Error != "" {
		t.Fatalf("plan %+v", p.Actions)
	}
	return &p.Actions[0]
}

func TestOptionalCountersNotAsked(t *testing.T) {
	root := copyHost(t, "roce-cx6dx")
	ap := optPlan(t, root, writer(root), countersConfig())
	if len(ap.Changes) != 0 || len(ap.Notes) != 1 || !strings.Contains(ap.Notes[0], "tuning.optional_counters names no counter") {
		t.Errorf("plan without counters asked: %+v", ap)
	}
}

// On a copied tree only the udev rule is written, for every port, and the
// plan says why the runtime part is skipped.
func TestOptionalCountersTree(t *testing.T) {
	root := copyHost(t, "roce-cx6dx")
	w := writer(root)
	orig := tree(t, root)
	cfg := countersConfig("cc_tx_cnp_pkts", "cc_rx_ce_pkts")
	ap := optPlan(t, root, w, cfg)
	if len(ap.Changes) != 1 || ap.Changes[0].Path != OptionalCountersRule || ap.Changes[0].Exists {
		t.Fatalf("changes %+v", ap.Changes)
	}
	if !strings.Contains(strings.Join(ap.Notes, "\n"), "runtime part skipped: this tree is not the running kernel's /sys") {
		t.Errorf("notes %q do not say the runtime part is skipped", ap.Notes)
	}
	if _, err := Apply(w, ap.Changes); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, OptionalCountersRule))
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "ACTION==") {
			rules = append(rules, l)
		}
	}
	want := []string{
		`ACTION=="add|move", SUBSYSTEM=="infiniband", KERNEL=="mlx5_0", RUN+="/usr/sbin/rdma statistic set link %k/1 optional-counters cc_rx_ce_pkts,cc_tx_cnp_pkts"`,
		`ACTION=="add|move", SUBSYSTEM=="infiniband", KERNEL=="mlx5_1", RUN+="/usr/sbin/rdma statistic set link %k/1 optional-counters cc_rx_ce_pkts,cc_tx_cnp_pkts"`,
	}
	if !reflect.DeepEqual(rules, want) {
		t.Errorf("rules\n%s\nwant\n%s", strings.Join(rules, "\n"), strings.Join(want, "\n"))
	}
	if !strings.HasPrefix(string(b), dropInHeader) {
		t.Errorf("rule file without the header: %q", b)
	}
	if again := optPlan(t, root, w, cfg); len(again.Changes) != 0 {
		t.Errorf("second plan: %+v", again.Changes)
	}
	if _, err := Rollback(w); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, orig, tree(t, root))
}

// On the running kernel (a fake of it): the union of what is on and what
// is asked, set at runtime and written to the rule; rollback restores the
// exact former set and the tree.
func TestOptionalCountersLive(t *testing.T) {
	root := copyHost(t, "roce-cx6dx")
	k := roceKernel()
	w := writer(root)
	w.Counters = k
	orig, origState := tree(t, root), k.state()
	cfg := countersConfig("cc_rx_ce_pkts", "cc_tx_cnp_pkts", "rdma_tx_bytes")
	ap := optPlan(t, root, w, cfg)
	if len(ap.Changes) != 2 {
		t.Fatalf("changes %+v", ap.Changes)
	}
	rt := ap.Changes[1]
	if rt.Area != AreaRDMA || rt.Path != "mlx5_0/1" || rt.Current != "cc_rx_cnp_pkts\n" || rt.Desired != "cc_rx_ce_pkts,cc_rx_cnp_pkts,cc_tx_cnp_pkts\n" || !rt.InPlace {
		t.Errorf("runtime change %+v", rt)
	}
	notes := strings.Join(ap.Notes, "\n")
	for _, n := range []string{
		"mlx5_0/1: offers no optional counter rdma_tx_bytes",
		"mlx5_1/1: offers none of cc_rx_ce_pkts,cc_tx_cnp_pkts,rdma_tx_bytes as an optional counter (it offers: none); not changed",
	} {
		if !strings.Contains(notes, n) {
			t.Errorf("notes %q lack %q", ap.Notes, n)
		}
	}
	if strings.Contains(notes, "skipped") {
		t.Errorf("live plan says something is skipped: %q", ap.Notes)
	}
	if _, err := Apply(w, ap.Changes); err != nil {
		t.Fatal(err)
	}
	if got := k.enabled["mlx5_0/1"]; !slices.Equal(got, mlx5Optional) {
		t.Errorf("enabled after apply %v", got)
	}
	b, _ := os.ReadFile(filepath.Join(root, OptionalCountersRule))
	if !strings.Contains(string(b), `KERNEL=="mlx5_0", RUN+="/usr/sbin/rdma statistic set link %k/1 optional-counters cc_rx_ce_pkts,cc_rx_cnp_pkts,cc_tx_cnp_pkts"`) ||
		strings.Contains(string(b), "mlx5_1") {
		t.Errorf("rule file:\n%s", b)
	}
	if again := optPlan(t, root, w, cfg); len(again.Changes) != 0 {
		t.Errorf("second plan: %+v", again.Changes)
	}
	restored, err := Rollback(w)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range restored {
		if e.Gone {
			t.Errorf("%s gone", e.Path)
		}
	}
	if !reflect.DeepEqual(k.state(), origState) {
		t.Errorf("counters after rollback %v, want %v", k.state(), origState)
	}
	diffTrees(t, orig, tree(t, root))

	// A port whose counters are all on: only the rule is planned; a port
	// the kernel cannot report on is a note.
	k.enabled["mlx5_0/1"] = slices.Clone(mlx5Optional)
	k.unsupported = map[string]bool{"mlx5_1/1": true}
	ap = optPlan(t, root, w, countersConfig("cc_rx_ce_pkts"))
	if len(ap.Changes) != 1 || ap.Changes[0].Area != AreaRoot || !strings.Contains(ap.Changes[0].Desired, "optional-counters "+strings.Join(mlx5Optional, ",")) {
		t.Errorf("changes %+v", ap.Changes)
	}
	if !strings.Contains(strings.Join(ap.Notes, "\n"), "mlx5_1/1: the kernel reports no optional counters") {
		t.Errorf("notes %q", ap.Notes)
	}
}

// An apply killed after every N writes restores the counters and the tree.
func TestOptionalCountersInterrupted(t *testing.T) {
	root := copyHost(t, "roce-cx6dx")
	k := roceKernel()
	w := writer(root)
	w.Counters = k
	orig, origState := tree(t, root), k.state()
	changes := optPlan(t, root, w, countersConfig(mlx5Optional...)).Changes
	counter := &Faulty{W: w, FailAfter: 1 << 30}
	if _, err := Apply(counter, changes); err != nil {
		t.Fatal(err)
	}
	total := counter.Writes()
	if _, err := Rollback(w); err != nil {
		t.Fatal(err)
	}
	for n := 0; n < total; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			if _, err := Apply(&Faulty{W: w, FailAfter: n}, changes); !errors.Is(err, ErrInjected) {
				t.Fatalf("apply after %d writes: %v", n, err)
			}
			if _, err := Rollback(w); err != nil && !errors.Is(err, ErrNoJournal) {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(k.state(), origState) {
				t.Errorf("counters %v, want %v", k.state(), origState)
			}
			diffTrees(t, orig, tree(t, root))
		})
	}
}

// A device gone between apply and rollback took its counters with it: the
// rollback says gone, restores the rest and removes the journal.
func TestOptionalCountersGone(t *testing.T) {
	root := copyHost(t, "roce-cx6dx")
	k := roceKernel()
	w := writer(root)
	w.Counters = k
	orig := tree(t, root)
	if _, err := Apply(w, optPlan(t, root, w, countersConfig("cc_rx_ce_pkts")).Changes); err != nil {
		t.Fatal(err)
	}
	delete(k.offered, "mlx5_0/1")
	restored, err := Rollback(w)
	if err != nil {
		t.Fatal(err)
	}
	gone := 0
	for _, e := range restored {
		if e.Gone {
			gone++
			if e.Area != AreaRDMA {
				t.Errorf("gone: %s:%s", e.Area, e.Path)
			}
		}
	}
	if gone != 1 {
		t.Errorf("%d gone, want 1: %+v", gone, restored)
	}
	diffTrees(t, orig, tree(t, root))
}

// AreaRDMA without the kernel refuses, and is never a file.
func TestAreaRDMA(t *testing.T) {
	root := copyHost(t, "roce-cx6dx")
	w := writer(root)
	if _, err := w.ReadFile(AreaRDMA, "mlx5_0/1"); !errors.Is(err, errNotLive) {
		t.Errorf("read without the kernel: %v", err)
	}
	if err := w.WriteInPlace(AreaRDMA, "mlx5_0/1", []byte("none\n")); !errors.Is(err, errNotLive) {
		t.Errorf("write without the kernel: %v", err)
	}
	w.Counters = roceKernel()
	for _, p := range []string{"mlx5_0", "mlx5_0/0", "mlx5_0/1/2", "/1", "mlx5_0/x"} {
		if _, err := w.ReadFile(AreaRDMA, p); err == nil {
			t.Errorf("read %q: no error", p)
		}
	}
	if err := w.WriteAtomic(AreaRDMA, "mlx5_0/1", []byte("none\n"), 0o644); err == nil {
		t.Error("an atomic file write to AreaRDMA passed")
	}
	if ok, err := w.Exists(AreaRDMA, "mlx5_7/1"); ok || err != nil {
		t.Errorf("exists of a missing port: %v %v", ok, err)
	}
	if err := w.WriteInPlace(AreaRDMA, "mlx5_0/1", []byte("cc_rx_ce_pkts, x\n")); err == nil {
		t.Error("a malformed set was written")
	}
	if b, err := w.ReadFile(AreaRDMA, "mlx5_1/1"); err != nil || string(b) != "none\n" {
		t.Errorf("empty set reads %q, %v", b, err)
	}
	// A journal entry of AreaRDMA is a file entry that existed.
	for _, e := range []Entry{{Area: AreaRDMA, Path: "mlx5_0/1", Kind: "dir"}, {Area: AreaRDMA, Path: "mlx5_0/1", Kind: "file"}} {
		if err := checkJournal(&Journal{Version: JournalVersion, Entries: []Entry{e}}); err == nil {
			t.Errorf("journal entry %+v accepted", e)
		}
	}
}
