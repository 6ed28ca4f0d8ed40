// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// On this machine's real kernel files, a kept descriptor re-read at
// offset 0 gives the current value, not the first one: the loopback
// receive counter grows after a packet, /proc/interrupts' timer counts
// after a moment.
func TestAttrRereadsRealKernelFiles(t *testing.T) {
	keptBefore := keptCount()
	sys, proc := Dir("/sys"), Dir("/proc")
	rx := NewAttr(sys, "class/net/lo/statistics/rx_bytes")
	intr := NewTable(proc, "interrupts")
	defer rx.Close()
	defer intr.Close()
	value := func() uint64 {
		t.Helper()
		b, err := rx.Read(nil)
		if err != nil {
			t.Fatalf("rx_bytes: %v (this test needs the real /sys of a Linux host)", err)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := value()
	c, err := net.Dial("udp", "127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		_, _ = c.Write(make([]byte, 512))
	}
	c.Close()
	if after := value(); after < before+5120 {
		t.Errorf("rx_bytes %d then %d after 5 KiB on lo: the kept descriptor served a stale value", before, after)
	}

	first, err := intr.Read(make([]byte, 0, 512)) // smaller than the file: read on to its end
	if err != nil {
		t.Fatal(err)
	}
	first = bytes.Clone(first)
	var second []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if second, err = intr.Read(make([]byte, 0, 512)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			break
		}
	}
	if bytes.Equal(first, second) {
		t.Error("/proc/interrupts read the same for 10 s through a kept descriptor")
	}
	whole, err := os.ReadFile("/proc/interrupts")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := bytes.Count(second, []byte("\n")), bytes.Count(whole, []byte("\n")); got != want {
		t.Errorf("/proc/interrupts re-read has %d lines, os.ReadFile %d: not the whole file", got, want)
	}
	if n := keptCount() - keptBefore; n != 2 {
		t.Errorf("%d descriptors kept, want 2", n)
	}
}

// On a regular file (a fixture tree) a kept descriptor sees content
// rewritten in place; a missing file stays absent without a system call
// until a new Attr; a FIFO is refused; a closed Attr still reads, without
// keeping a descriptor.
func TestAttrRegularFiles(t *testing.T) {
	dir := t.TempDir()
	f := Dir(dir)
	write := func(name, v string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("state", "4: ACTIVE\n")
	a := NewAttr(f, "state")
	if b, err := a.Read(nil); err != nil || string(b) != "4: ACTIVE\n" {
		t.Fatalf("%q %v", b, err)
	}
	write("state", "1: DOWN\n")
	if b, err := a.Read(nil); err != nil || string(b) != "1: DOWN\n" {
		t.Errorf("after a rewrite: %q %v", b, err)
	}
	big := strings.Repeat("x", 10000) + "\n"
	write("big", big)
	if b, err := NewAttr(f, "big").Read(make([]byte, 0, 64)); err != nil || string(b) != big {
		t.Errorf("a file larger than the buffer: %d bytes, %v", len(b), err)
	}

	missing := NewAttr(f, "lid")
	if _, err := missing.Read(nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	write("lid", "0x1\n")
	if _, err := missing.Read(nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file reappeared in the same Attr: %v", err)
	}
	if b, err := NewAttr(f, "lid").Read(nil); err != nil || string(b) != "0x1\n" {
		t.Errorf("a new Attr: %q %v", b, err)
	}

	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := NewAttr(f, "fifo").Read(nil); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("fifo: %v, want ErrNotRegular", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a FIFO read through an Attr blocked")
	}

	kept := keptCount()
	a.Close()
	if keptCount() != kept-1 {
		t.Errorf("Close kept the descriptor: %d then %d", kept, keptCount())
	}
	write("state", "4: ACTIVE\n")
	if b, err := a.Read(nil); err != nil || string(b) != "4: ACTIVE\n" || keptCount() != kept-1 {
		t.Errorf("a closed Attr: %q %v, %d kept", b, err, keptCount())
	}
}

// A kept attribute whose read is stuck in the kernel costs one thread: the
// next read of it is refused at once (ErrStuck), not queued behind the
// stuck one, and reads again once that one returns.
func TestAttrStuckRead(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "state"), []byte("4: ACTIVE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := Dir(dir)
	d := f.(*dirFS)
	SetStuckAfter(f, 0)
	entered, release := make(chan struct{}), make(chan struct{})
	first := true
	d.hook = func(string) {
		if first {
			first = false
			close(entered)
			<-release
		}
	}
	a := NewAttr(f, "state")
	done := make(chan error, 1)
	go func() { _, err := a.Read(nil); done <- err }()
	<-entered
	refused := make(chan error, 1)
	go func() { _, err := a.Read(nil); refused <- err }()
	select {
	case err := <-refused:
		if !errors.Is(err, ErrStuck) {
			t.Errorf("second read of a stuck attribute: %v, want ErrStuck", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the second read waited for the stuck one")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the stuck read: %v", err)
	}
	if b, err := a.Read(nil); err != nil || string(b) != "4: ACTIVE\n" {
		t.Errorf("after the stuck read returned: %q %v", b, err)
	}
}

// Kept re-reads a file in place, and reads a file that went and came back
// (a netdev re-created under the same name) instead of remembering it
// missing.
func TestKept(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "operstate")
	k := Kept(Dir(dir))
	if _, err := k.ReadFile("operstate"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	for _, v := range []string{"up\n", "down\n"} {
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		if b, err := k.ReadFile("operstate"); err != nil || string(b) != v {
			t.Errorf("read %q %v, want %q", b, err, v)
		}
	}
	b1, _ := k.ReadFile("operstate")
	b2, _ := k.ReadFile("operstate")
	if &b1[0] == &b2[0] {
		t.Error("two reads share a buffer: the content must be the caller's")
	}
}

// An attribute the kernel refuses for good (EINVAL from a restricted
// function; here EISDIR, which a test can make) is asked once: later reads
// return the same error, marked ErrRefused, without a system call, until a
// new Attr.
func TestAttrRefusedOnce(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "fw_ver")
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	f := Dir(dir)
	a := NewAttr(f, "fw_ver")
	_, first := a.Read(nil)
	if !errors.Is(first, syscall.EISDIR) {
		t.Fatalf("first read: %v, want EISDIR", first)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("28.39.1002\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Read(nil); !errors.Is(err, ErrRefused) || !errors.Is(err, syscall.EISDIR) {
		t.Errorf("second read: %v, want the remembered %v as a refusal (no new read)", err, first)
	}
	if errors.Is(first, ErrRefused) {
		t.Errorf("the first refusal is an error like any other, not a remembered one: %v", first)
	}
	if b, err := NewAttr(f, "fw_ver").Read(nil); err != nil || string(b) != "28.39.1002\n" {
		t.Errorf("a new Attr: %q %v", b, err)
	}
}

// holdAttr starts a read of a that the FS's hook holds inside (a read
// stuck in the kernel) until release is closed; done gets its error.
func holdAttr(t *testing.T, d *dirFS, a *Attr) (release chan struct{}, done chan error) {
	t.Helper()
	entered := make(chan struct{})
	release, done = make(chan struct{}), make(chan error, 1)
	var once sync.Once
	d.hook = func(p string) {
		if p != d.path(a.name) {
			return
		}
		held := false
		once.Do(func() { held = true })
		if held {
			close(entered)
			<-release
		}
	}
	go func() { _, err := a.Read(nil); done <- err }()
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("read returned without being held: %v", err)
	case <-time.After(guard):
		t.Fatal("read never reached the hook")
	}
	return release, done
}

// An Attr's stuck read shows in its FS's stats as a path's does: in
// flight, stuck, and each refused read counted; nothing once it returns,
// and a closed Attr is no longer counted at all.
func TestAttrStats(t *testing.T) {
	dir := writeFiles(t, map[string]string{"state": "4: ACTIVE\n", "rate": "400 Gb/sec (4X NDR)\n"})
	d := Dir(dir).(*dirFS)
	SetStuckAfter(d, time.Hour)
	a, other := NewAttr(d, "state"), NewAttr(d, "rate")
	defer other.Close()
	release, done := holdAttr(t, d, a)
	if s := stats(t, d); s != (ReadStats{InFlight: 1}) {
		t.Errorf("one read in flight for less than an hour: %+v, want 1 in flight, none stuck", s)
	}
	SetStuckAfter(d, 0)
	for range 2 {
		if _, err := a.Read(nil); !errors.Is(err, ErrStuck) {
			t.Fatalf("read of a stuck Attr: %v, want ErrStuck", err)
		}
	}
	if b, err := other.Read(nil); err != nil || string(b) != "400 Gb/sec (4X NDR)\n" {
		t.Errorf("another Attr while one is stuck: %q, %v", b, err)
	}
	if s := stats(t, d); s != (ReadStats{Refused: 2, Stuck: 1, InFlight: 1}) {
		t.Errorf("while stuck: %+v, want 2 refused, 1 stuck, 1 in flight", s)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the stuck read, released: %v", err)
	}
	if s := stats(t, d); s != (ReadStats{Refused: 2}) {
		t.Errorf("after release: %+v, want 2 refused, nothing in flight", s)
	}
	a.Close()
	if _, ok := d.reads.attrs[a]; ok {
		t.Error("a closed Attr is still counted")
	}
}

// Close does not wait for a read stuck in the kernel (a device's
// attributes are replaced while one of its files is wedged); the read
// closes the descriptor when it returns.
func TestAttrCloseDuringStuckRead(t *testing.T) {
	dir := writeFiles(t, map[string]string{"state": "4: ACTIVE\n"})
	d := Dir(dir).(*dirFS)
	a := NewAttr(d, "state")
	if _, err := a.Read(nil); err != nil {
		t.Fatal(err)
	}
	open := keptCount()
	release, done := holdAttr(t, d, a)
	closed := make(chan struct{})
	go func() { a.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(guard):
		t.Fatal("Close waited for the stuck read")
	}
	if keptCount() != open {
		t.Errorf("Close released the descriptor of a read in flight: %d kept, was %d", keptCount(), open)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the held read: %v", err)
	}
	if keptCount() != open-1 {
		t.Errorf("the read that returned after Close kept its descriptor: %d kept, want %d", keptCount(), open-1)
	}
}

// Past the budget of kept descriptors, an Attr reads with open, read and
// close: its value is as current as a kept one's, and the process keeps
// no more than the budget however often the files are read.
func TestAttrKeptBudget(t *testing.T) {
	dir := t.TempDir()
	f := Dir(dir)
	budget := keptCount() + 2
	before := keptMax
	keptMax = func() int64 { return budget }
	t.Cleanup(func() { keptMax = before })

	var attrs []*Attr
	for i := range 5 {
		name := fmt.Sprintf("port_rcv_data%d", i)
		if err := os.WriteFile(filepath.Join(dir, name), fmt.Appendf(nil, "%d\n", i), 0o644); err != nil {
			t.Fatal(err)
		}
		a := NewAttr(f, name)
		t.Cleanup(a.Close)
		attrs = append(attrs, a)
	}
	for round := range 3 {
		for i, a := range attrs {
			want := fmt.Sprintf("%d\n", 100*round+i)
			if err := os.WriteFile(filepath.Join(dir, a.Name()), []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			if b, err := a.Read(nil); err != nil || string(b) != want {
				t.Errorf("round %d, %s: %q %v, want %q", round, a.Name(), b, err, want)
			}
		}
		if n := keptCount(); n != budget {
			t.Errorf("round %d: %d descriptors kept, want the budget %d", round, n, budget)
		}
	}
	if KeptFiles() != int(budget) {
		t.Errorf("KeptFiles() = %d, want %d", KeptFiles(), budget)
	}
}
