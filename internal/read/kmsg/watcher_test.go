// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package kmsg

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func newTestWatcher(t *testing.T, path string, now *time.Time) *Watcher {
	t.Helper()
	w, err := New(Options{Path: path, Now: func() time.Time { return *now },
		BootTime: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func fixture(t *testing.T) string {
	b, err := os.ReadFile("testdata/kmsg-fixture.txt")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func count(r Report, pci, event string) (live, hist uint64, ok bool) {
	for _, c := range r.Counts {
		if c.Subject.PCI == pci && r.Events[c.Event].Name == event {
			return c.Live, c.History, true
		}
	}
	return 0, 0, false
}

// TestFileHistoryThenLive reads a regular file in /dev/kmsg's format: what
// is there at the first drain is history, dated from the boot time; what
// is appended later is live, dated when read. A user-space write (facility
// 1) forging a driver message is not counted.
func TestFileHistoryThenLive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg")
	if err := os.WriteFile(path, []byte(fixture(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	w := newTestWatcher(t, path, &now)
	if _, ok := w.open(); !ok {
		t.Fatal(w.Report().Status)
	}
	defer w.close()
	w.Drain()
	r := w.Report()
	if !r.Status.Reading || r.Stats.Records != 4 || r.Stats.HistoryRecords != 4 || !r.Stats.HistoryDone || r.Stats.Matched != 2 {
		t.Fatalf("after history: %+v", r)
	}
	if live, hist, ok := count(r, "0041:01:00.0", "fw_fatal_error"); !ok || live != 0 || hist != 1 {
		t.Errorf("fw_fatal_error history: live %d history %d (%v): the forged user-space copy must not count", live, hist, ok)
	}
	var fatal Last
	for _, l := range r.Last {
		if r.Events[l.Event].Name == "fw_fatal_error" {
			fatal = l
		}
	}
	if !fatal.History || !fatal.Last.Equal(time.Date(2026, 1, 1, 0, 10, 49, 335564000, time.UTC)) {
		t.Errorf("history dating: %+v", fatal)
	}

	now = now.Add(time.Minute)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The same record again (a reader reopened after it) and a new one,
	// its continuation line written separately.
	fmt.Fprint(f, "3,1002,649335564,-;mlx5_core 0041:01:00.0: poll_health:817:(pid 0): Fatal error 1 detected\n")
	fmt.Fprint(f, "3,1010,700000000,-;mlx5_core 0041:01:00.0: poll_health:817:(pid 0): Fatal error 1 detected\n")
	w.Drain()
	fmt.Fprint(f, " DEVICE=+pci:0041:01:00.0\n4,1011,700000001,-;mlx5_core 0000:5c:00.0: mlx5_pcie_event:299:(pid 268269): Detected insufficient power on the PCIe slot (27W).\n")
	f.Close()
	w.Drain()
	r = w.Report()
	if live, hist, _ := count(r, "0041:01:00.0", "fw_fatal_error"); live != 1 || hist != 1 {
		t.Errorf("fw_fatal_error after append: live %d history %d, want 1 and 1 (the repeated sequence number is the same record)", live, hist)
	}
	if live, _, _ := count(r, "0000:5c:00.0", "pcie_power_insufficient"); live != 1 {
		t.Errorf("pcie_power_insufficient: %d", live)
	}
	if r.Stats.Duplicates != 1 || r.Stats.SeqResets != 0 {
		t.Errorf("duplicates %d, resets %d, want 1 and 0", r.Stats.Duplicates, r.Stats.SeqResets)
	}
	if r.Stats.Lost != 5 {
		t.Errorf("lost %d, want 5 (sequence numbers 1005 to 1009)", r.Stats.Lost)
	}
	for _, l := range r.Last {
		if r.Events[l.Event].Name == "fw_fatal_error" && (l.History || l.Repeats != 2 || !l.Last.Equal(now)) {
			t.Errorf("live repeat: %+v", l)
		}
	}
}

// TestFIFO: a FIFO in place of /dev/kmsg opens without a writer and
// reads what a writer sends; nothing blocks.
func TestFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	w := newTestWatcher(t, path, &now)
	if _, ok := w.open(); !ok {
		t.Fatal(w.Report().Status)
	}
	defer w.close()
	w.Drain() // no writer: returns at once
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, "4,5,1,-;NETDEV WATCHDOG: eth1 (mlx5_core): transmit queue 19 timed out\n")
	f.Close()
	w.Drain()
	r := w.Report()
	found := false
	for _, c := range r.Counts {
		if r.Events[c.Event].Name == "netdev_watchdog" && c.Subject.Netdev == "eth1" && c.Live == 1 {
			found = true
		}
	}
	if !found {
		t.Errorf("no live netdev_watchdog for eth1: %+v", r.Counts)
	}
}

func TestUnreadable(t *testing.T) {
	now := time.Now()
	w := newTestWatcher(t, filepath.Join(t.TempDir(), "dev", "kmsg"), &now)
	if _, ok := w.open(); ok {
		t.Fatal("opened a missing file")
	}
	if s := w.Report().Status; s.Reading || s.Reason != ReasonAbsent {
		t.Errorf("missing: %+v", s)
	}
	for err, want := range map[error]string{
		syscall.EPERM: ReasonPermission, syscall.EACCES: ReasonPermission,
		syscall.ENOENT: ReasonAbsent, syscall.EIO: ReasonError,
	} {
		if got := reasonOf(err); got != want {
			t.Errorf("reasonOf(%v) = %s, want %s", err, got, want)
		}
	}
	// A directory in its place is not the kernel log: refused, never
	// opened.
	dir := t.TempDir()
	w = newTestWatcher(t, dir, &now)
	if _, ok := w.open(); ok {
		t.Fatal("opened a directory")
	}
	if s := w.Report().Status; s.Reading || s.Reason != ReasonNotKmsg {
		t.Errorf("directory: %+v", s)
	}
}

// TestBounded: a flood of distinct subjects stays within MaxKeys counts
// and MaxLast messages, every event still counted.
func TestBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg")
	var b strings.Builder
	n := 2 * MaxKeys
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "3,%d,1,-;mlx5_core 0000:%02x:%02x.0: wait_func:1132:(pid 1): ENABLE_HCA(0x104) timeout. Will cause a leak of a command resource\n", i, i/32, i%32)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	w := newTestWatcher(t, path, &now)
	w.open()
	defer w.close()
	w.Drain()
	r := w.Report()
	var total uint64
	for _, c := range r.Counts {
		total += c.History
	}
	if len(r.Counts) > MaxKeys+1 || len(r.Last) > MaxLast || total != uint64(n) || r.Stats.Overflow != uint64(n-MaxKeys) {
		t.Errorf("counts %d, last %d, total %d, overflow %d", len(r.Counts), len(r.Last), total, r.Stats.Overflow)
	}
}

func TestLongLineDropped(t *testing.T) {
	now := time.Now()
	w := newTestWatcher(t, "unused", &now)
	w.feed([]byte(strings.Repeat("x", maxPending+1)), false)
	if r := w.Report(); r.Stats.Unparsable != 1 || len(w.pending) != 0 {
		t.Errorf("%+v pending %d", r.Stats, len(w.pending))
	}
}
