// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package kmsg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

// Recorded real lines (testdata/recorded.txt): a corrected AER of another
// driver's function and mlx5's fatal health error.
const (
	foreignAER = "alx %s: AER: PCIe Bus Error: severity=Corrected, type=Data Link Layer, (Receiver ID)"
	mlx5Fatal  = "mlx5_core %s: poll_health:817:(pid 0): Fatal error 1 detected"
)

func pciN(bus, n int) string { return fmt.Sprintf("%04x:%02x:%02x.%d", bus, n/256, n%256/8, n%8) }

// feedLines feeds records of msgs (kernel facility, level 3) to w.
func feedLines(w *Watcher, seq *uint64, msgs ...string) {
	var b strings.Builder
	for _, m := range msgs {
		*seq++
		fmt.Fprintf(&b, "3,%d,1,-;%s\n", *seq, m)
	}
	w.feed([]byte(b.String()), false)
	w.flush(false)
}

// TestRDMADevicesKeepSlots: 600 corrected AER lines of other devices'
// functions fill the slots; the 3 fatal lines of mlx5_0's function that
// follow are all counted under it, and its last message is kept.
func TestRDMADevicesKeepSlots(t *testing.T) {
	const mlx5_0 = "0000:61:00.0"
	now := time.Now()
	w, err := New(Options{Path: "unused", Now: func() time.Time { return now },
		IsRDMA: func(s Subject) bool { return s.PCI == mlx5_0 }})
	if err != nil {
		t.Fatal(err)
	}
	var seq uint64
	for i := 0; i < 600; i++ {
		feedLines(w, &seq, fmt.Sprintf(foreignAER, pciN(0x10, i)))
	}
	for i := 0; i < 3; i++ {
		feedLines(w, &seq, fmt.Sprintf(mlx5Fatal, mlx5_0))
	}
	r := w.Report()
	if live, _, ok := count(r, mlx5_0, "fw_fatal_error"); !ok || live != 3 {
		t.Errorf("mlx5_0 fw_fatal_error: %d (%v), want 3", live, ok)
	}
	if r.Stats.Evicted != 1 || r.Stats.Overflow != 600-MaxKeys {
		t.Errorf("evicted %d, overflow %d: want 1 and %d", r.Stats.Evicted, r.Stats.Overflow, 600-MaxKeys)
	}
	// Nothing lost: every AER line is still counted, under its function
	// or under the empty subject.
	var aer uint64
	for _, c := range r.Counts {
		if r.Events[c.Event].Name == "pcie_aer_corrected" {
			aer += c.Live
		}
	}
	if aer != 600 || len(r.Counts) > MaxKeys+len(Events) {
		t.Errorf("aer %d (want 600), %d counts", aer, len(r.Counts))
	}
	found := false
	for _, l := range r.Last {
		if l.Subject.PCI == mlx5_0 && r.Events[l.Event].Name == "fw_fatal_error" && l.Repeats == 3 && l.Family == FamilyMLX5 {
			found = true
		}
	}
	if !found {
		t.Errorf("mlx5_0's last fatal message was not kept")
	}
}

// TestForeignNeverTakesADevicesPlace: with every slot held by the host's
// RDMA devices, another device's AER line counts under the empty subject
// and evicts nothing; an RDMA driver's message about a subject the host
// does not know (a renamed netdev) does not either.
func TestForeignNeverTakesADevicesPlace(t *testing.T) {
	now := time.Now()
	w, err := New(Options{Path: "unused", Now: func() time.Time { return now },
		IsRDMA: func(s Subject) bool { return strings.HasPrefix(s.PCI, "0041:") }})
	if err != nil {
		t.Fatal(err)
	}
	var seq uint64
	for i := 0; i < MaxKeys; i++ {
		feedLines(w, &seq, fmt.Sprintf(mlx5Fatal, pciN(0x41, i)))
	}
	feedLines(w, &seq, fmt.Sprintf(foreignAER, "0000:07:00.0"),
		"NETDEV WATCHDOG: eth9 (mlx5_core): transmit queue 19 timed out")
	r := w.Report()
	if r.Stats.Evicted != 0 || r.Stats.Overflow != 2 {
		t.Errorf("evicted %d, overflow %d: want 0 and 2", r.Stats.Evicted, r.Stats.Overflow)
	}
	for i := 0; i < MaxKeys; i++ {
		if live, _, ok := count(r, pciN(0x41, i), "fw_fatal_error"); !ok || live != 1 {
			t.Fatalf("device %s lost its slot: %d %v", pciN(0x41, i), live, ok)
		}
	}
}

// TestNotKmsgDeviceRefused: a character device that is not the kernel
// log (/dev/null, /dev/zero: the latter would feed zeros forever) or a
// directory in its place is refused before any read, with one log line,
// and the reader then waits for nothing: it returns when cancelled.
func TestNotKmsgDeviceRefused(t *testing.T) {
	for _, p := range []string{"/dev/null", "/dev/zero", t.TempDir()} {
		if _, err := os.Stat(p); err != nil {
			testenv.SkipOrFail(t, p+" is missing: "+err.Error())
		}
		logs := &testenv.Records{}
		now := time.Now()
		w, err := New(Options{Path: p, Now: func() time.Time { return now }, RetryOpen: time.Millisecond,
			Logger: slog.New(logs)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		first, done := make(chan struct{}), make(chan struct{})
		go func() { w.Run(ctx, first); close(done) }()
		<-first
		st := w.Report().Status
		if st.Reading || st.Reason != ReasonNotKmsg || !errors.Is(st.Err, errNotKmsg) {
			t.Errorf("%s: %+v", p, st)
		}
		cancel()
		<-done
		if n := len(logs.Matching("cannot read the kernel log")); n != 1 {
			t.Errorf("%s: %d log lines, want 1", p, n)
		}
		if w.reads != 0 {
			t.Errorf("%s: %d reads of a refused file", p, w.reads)
		}
	}
}

// TestAbsentNotRetried: no log below the root: one log line, the status
// says absent, and nothing is tried again (no retry timer runs: Run only
// waits for its context). The line is a warning below a live host's root
// and info below a fixture tree (NotLive), where no log is expected.
func TestAbsentNotRetried(t *testing.T) {
	for _, notLive := range []bool{false, true} {
		logs := &testenv.Records{}
		now := time.Now()
		w, err := New(Options{Path: filepath.Join(t.TempDir(), "dev", "kmsg"), Now: func() time.Time { return now },
			RetryOpen: time.Nanosecond, Logger: slog.New(logs), NotLive: notLive})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		first, done := make(chan struct{}), make(chan struct{})
		go func() { w.Run(ctx, first); close(done) }()
		<-first
		cancel()
		<-done
		if st := w.Report().Status; st.Reason != ReasonAbsent {
			t.Errorf("NotLive=%v: %+v", notLive, st)
		}
		var warns, infos int
		for _, r := range append(logs.Matching("cannot read the kernel log"), logs.Matching("no kernel log below this root")...) {
			switch r.Level {
			case slog.LevelWarn:
				warns++
			case slog.LevelInfo:
				infos++
			}
		}
		if want := map[bool][2]int{false: {1, 0}, true: {0, 1}}[notLive]; warns != want[0] || infos != want[1] {
			t.Errorf("NotLive=%v: %d warning and %d info lines, want %d and %d", notLive, warns, infos, want[0], want[1])
		}
	}
}

// TestFIFOWriterNeverWrites: a FIFO whose writer holds it open and never
// writes costs one read a round (EAGAIN), keeps nothing, and a cancelled
// reader returns.
func TestFIFOWriterNeverWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	w := newTestWatcher(t, path, &now)
	if _, ok := w.open(); !ok {
		t.Fatal(w.Report().Status)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := 0; i < 3; i++ {
		w.Drain()
	}
	if r := w.Report(); w.reads != 3 || r.Stats.Records != 0 || !r.Status.Reading || !r.Status.Polled {
		t.Errorf("reads %d, %+v", w.reads, r)
	}
	w.close()

	ctx, cancel := context.WithCancel(context.Background())
	w = newTestWatcher(t, path, &now)
	first, done := make(chan struct{}), make(chan struct{})
	go func() { w.Run(ctx, first); close(done) }()
	<-first
	cancel()
	<-done
}

// TestFIFOEndlessLine: a writer that sends 1 MiB without a newline, then
// a record: the long line is dropped to its end and counted, memory stays
// within maxPending, and the record after it counts.
func TestFIFOEndlessLine(t *testing.T) {
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
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := f.Write([]byte(strings.Repeat("x", 1<<20) + "\n3,7,1,-;" + fmt.Sprintf(mlx5Fatal, "0000:61:00.0") + "\n"))
		f.Close()
		wrote <- err
	}()
	for finished := false; ; {
		w.Drain()
		if len(w.pending) > maxPending || cap(w.pending) > 2*maxPending+readBuf {
			t.Fatalf("pending %d (cap %d) over its bound", len(w.pending), cap(w.pending))
		}
		if finished {
			break
		}
		select {
		case err := <-wrote:
			if err != nil {
				t.Fatal(err)
			}
			finished = true // one more drain reads the rest
		default:
		}
	}
	r := w.Report()
	if r.Stats.Unparsable != 1 || r.Stats.Records != 1 || r.Stats.Matched != 1 {
		t.Errorf("unparsable %d, records %d, matched %d: want 1, 1, 1", r.Stats.Unparsable, r.Stats.Records, r.Stats.Matched)
	}
}

// TestRegularFileEndless: a 256 MiB regular file of zeros (sparse: no
// disk) in place of the log: one round reads at most maxPerRound blocks,
// holds at most maxPending bytes, and counts the line it drops.
func TestRegularFileEndless(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(256 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	now := time.Now()
	w := newTestWatcher(t, path, &now)
	if _, ok := w.open(); !ok {
		t.Fatal(w.Report().Status)
	}
	defer w.close()
	w.Drain()
	r := w.Report()
	if w.reads != maxPerRound || len(w.pending) > maxPending || r.Stats.Unparsable != 1 || r.Stats.Records != 0 {
		t.Errorf("reads %d (want %d), pending %d, unparsable %d, records %d", w.reads, maxPerRound, len(w.pending), r.Stats.Unparsable, r.Stats.Records)
	}
}

// TestSequenceNear2to64: sequence numbers at the top of the uint64 range
// and then small again (not the same log: a reset) are all counted, no
// gap of 2^64 is taken for lost records, and a time since boot near 2^64
// µs leaves the record undated instead of overflowing.
func TestSequenceNear2to64(t *testing.T) {
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	w := newTestWatcher(t, "unused", &now)
	var b strings.Builder
	for _, seq := range []uint64{math.MaxUint64 - 1, math.MaxUint64, 0, 1} {
		fmt.Fprintf(&b, "3,%d,%d,-;%s\n", seq, uint64(math.MaxUint64), fmt.Sprintf(mlx5Fatal, "0000:61:00.0"))
	}
	w.feed([]byte(b.String()), true)
	w.flush(true)
	r := w.Report()
	if _, hist, _ := count(r, "0000:61:00.0", "fw_fatal_error"); hist != 4 {
		t.Errorf("history %d, want 4", hist)
	}
	if r.Stats.Records != 4 || r.Stats.Lost != 0 || r.Stats.SeqResets != 1 || r.Stats.Duplicates != 0 {
		t.Errorf("%+v", r.Stats)
	}
	for _, l := range r.Last {
		if !l.Last.IsZero() {
			t.Errorf("dated from an impossible time since boot: %v", l.Last)
		}
	}
	// A jump forward no ring explains is a reset too, not 2^40 lost
	// records.
	w.feed([]byte(fmt.Sprintf("3,%d,1,-;x\n", uint64(1)<<40)), false)
	w.flush(false)
	if r := w.Report(); r.Stats.Lost != 0 || r.Stats.SeqResets != 2 {
		t.Errorf("after a jump: %+v", r.Stats)
	}
}

// TestKernelLog reads this machine's /dev/kmsg through the poller: the
// history is read and the reader is caught up; a record written after it
// wakes it (a user-space write: read and counted as a record, never as an
// event); cancelling closes the file and ends the blocked read.
func TestKernelLog(t *testing.T) {
	now := time.Now()
	w, err := New(Options{Path: "/dev/kmsg", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	first, done := make(chan struct{}), make(chan struct{})
	go func() { w.Run(ctx, first); close(done) }()
	<-first
	st := w.Report().Status
	if !st.Reading {
		cancel()
		<-done
		t.Skipf("this machine's /dev/kmsg is not readable here (%s: %v); the reader's handling of that is TestUnreadable's", st.Reason, st.Err)
	}
	if st.Polled || !w.Report().Stats.HistoryDone {
		t.Errorf("not read through the poller, or not caught up: %+v %+v", st, w.Report().Stats)
	}
	before, fatal := w.Report().Stats.Records, countAll(w.Report(), "fw_fatal_error")
	if f, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0); err == nil {
		fmt.Fprint(f, "<14>rdma_doctor kmsg test: mlx5_core 0000:61:00.0: poll_health:817:(pid 0): Fatal error 1 detected\n")
		f.Close()
		// Wait for the record (a condition, not a time: the test's own
		// deadline bounds it).
		for w.Report().Stats.Records == before {
			time.Sleep(time.Millisecond)
		}
		if countAll(w.Report(), "fw_fatal_error") != fatal {
			t.Errorf("a user-space write was counted as an event")
		}
	} else {
		t.Logf("cannot write /dev/kmsg (%v): the wake-up on a new record is not checked", err)
	}
	cancel()
	<-done
	if w.file != nil || w.fd >= 0 {
		t.Errorf("the log is still open after Run returned")
	}
}

func countAll(r Report, event string) (n uint64) {
	for _, c := range r.Counts {
		if r.Events[c.Event].Name == event {
			n += c.Live
		}
	}
	return n
}
