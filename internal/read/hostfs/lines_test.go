// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// collect reads name line by line and returns copies of the lines.
func collect(f FS, name string) ([]string, error) {
	var got []string
	err := ReadLines(context.Background(), f, name, func(num int, line []byte) error {
		if num != len(got)+1 {
			return fmt.Errorf("line %d numbered %d", len(got)+1, num)
		}
		got = append(got, string(line))
		return nil
	})
	return got, err
}

// ReadLines gives every line once, in order, without its newline, through
// Dir and through the ReadFile fallback alike: lines cut by the read
// buffer, a last line without a newline, blank lines, CRs kept, a line of
// exactly MaxLineSize.
func TestReadLines(t *testing.T) {
	var mixed strings.Builder
	for i := range 20000 {
		// lengths vary so that lines straddle every 64 KiB read
		fmt.Fprintf(&mixed, "%d:%s\n", i, strings.Repeat("x", i%97))
	}
	long := strings.Repeat("L", MaxLineSize)
	files := map[string]string{
		"empty":     "",
		"one":       "a\n",
		"no_eol":    "a\nb",
		"blank":     "\n\na\n\n",
		"crlf":      "CPU0\r\n 1: 2\r\n",
		"mixed":     mixed.String(),
		"max_line":  "first\n" + long + "\nlast\n",
		"max_noeol": "first\n" + long,
	}
	dir := writeFiles(t, files)
	for fsName, f := range map[string]FS{"dir": Dir(dir), "fallback": onlyReadFile{Dir(dir)}} {
		for name, content := range files {
			got, err := collect(f, name)
			want := strings.Split(content, "\n")
			if strings.HasSuffix(content, "\n") || content == "" {
				want = want[:len(want)-1]
			}
			if err != nil || strings.Join(got, "\n") != strings.Join(want, "\n") || len(got) != len(want) {
				t.Errorf("%s: ReadLines(%s) = %d lines, %v; want %d lines", fsName, name, len(got), err, len(want))
			}
		}
		if _, err := collect(f, "missing"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: missing file: %v, want ErrNotExist", fsName, err)
		}
	}
}

// A line longer than MaxLineSize stops the read with an error naming the
// line, wherever the line sits in the read buffer, through Dir and the
// fallback.
func TestReadLinesTooLong(t *testing.T) {
	over := strings.Repeat("o", MaxLineSize+1)
	files := map[string]string{
		"third":      "a\nb\n" + over + "\nd\n",
		"first_eof":  over,
		"after_70k":  strings.Repeat(strings.Repeat("y", 99)+"\n", 700) + over + "\n",
		"endless":    strings.Repeat("z", 3*MaxLineSize),
		"just_under": "a\n" + over[1:] + "\n",
	}
	wantLine := map[string]int{"third": 3, "first_eof": 1, "after_70k": 701, "endless": 1}
	dir := writeFiles(t, files)
	for fsName, f := range map[string]FS{"dir": Dir(dir), "fallback": onlyReadFile{Dir(dir)}} {
		for name := range files {
			got, err := collect(f, name)
			n, tooLong := wantLine[name]
			if !tooLong {
				if err != nil || len(got) != 2 {
					t.Errorf("%s: %s: %d lines, %v; want 2 lines", fsName, name, len(got), err)
				}
				continue
			}
			var le *LineError
			if !errors.Is(err, ErrLineTooLong) || !errors.As(err, &le) || le.Line != n ||
				!strings.Contains(err.Error(), fmt.Sprintf("line %d:", n)) {
				t.Errorf("%s: %s: %v, want ErrLineTooLong at line %d", fsName, name, err, n)
			}
			if len(got) != n-1 {
				t.Errorf("%s: %s: %d lines before the long one, want %d", fsName, name, len(got), n-1)
			}
		}
	}
}

// A file past MaxFileSize, which ReadFile refuses, streams through
// ReadLines in a fixed amount of memory: what the read allocates stays
// under a tenth of the file.
func TestReadLinesLargeFileBoundedMemory(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "big")
	row := strings.Repeat(" 1234567890", 500) + "  IR-PCI-MSIX-0000:1a:00.0  1-edge  mlx5_comp0@pci:0000:1a:00.0\n"
	nrows := MaxFileSize/len(row) + 500
	if err := os.WriteFile(p, bytes.Repeat([]byte(row), nrows), 0o644); err != nil {
		t.Fatal(err)
	}
	d := Dir(dir)
	if _, err := d.ReadFile("big"); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ReadFile of %d bytes: %v, want ErrTooLarge (the test needs a file over the limit)", nrows*len(row), err)
	}
	size := int64(nrows * len(row))
	var lines, bytesSeen int64
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := ReadLines(context.Background(), d, "big", func(_ int, line []byte) error {
		lines++
		bytesSeen += int64(len(line)) + 1
		return nil
	})
	runtime.ReadMemStats(&after)
	if err != nil || lines != int64(nrows) || bytesSeen != size {
		t.Fatalf("%d lines, %d bytes, %v; want %d lines, %d bytes", lines, bytesSeen, err, nrows, size)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(size/10) {
		t.Errorf("streaming %d bytes allocated %d bytes, want under %d", size, alloc, size/10)
	}
}

// A FIFO is refused before any line, with or without a writer; the read
// never blocks.
func TestReadLinesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"fifo", "fifo_written"} {
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w, err := os.OpenFile(filepath.Join(dir, "fifo_written"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteString("CPU0\n"); err != nil {
		t.Fatal(err)
	}
	d := Dir(dir)
	for _, name := range []string{"fifo", "fifo_written", "."} {
		var got []string
		err := answer(t, "ReadLines("+name+")", func() error {
			var err error
			got, err = collect(d, name)
			return err
		})
		if name == "." {
			if err == nil {
				t.Error("a directory: want an error")
			}
			continue
		}
		if !errors.Is(err, ErrNotRegular) || len(got) != 0 {
			t.Errorf("ReadLines(%s): %d lines, %v; want none and %v", name, len(got), err, ErrNotRegular)
		}
	}
}

// A streamed read that does not return makes the next reads of its path
// fail at once with ErrStuck, like every other read; fn is not called.
func TestReadLinesStuck(t *testing.T) {
	dir := writeFiles(t, map[string]string{"interrupts": "CPU0\n"})
	d := Dir(dir).(*dirFS)
	SetStuckAfter(d, 0)
	b := block(d, "interrupts")
	first := make(chan error, 1)
	go func() { _, err := collect(d, "interrupts"); first <- err }()
	<-b.entered
	called := false
	err := d.ReadLines(context.Background(), "interrupts", func(int, []byte) error { called = true; return nil })
	if !errors.Is(err, ErrStuck) || called {
		t.Fatalf("read of the stuck path: %v (fn called: %v), want ErrStuck", err, called)
	}
	if s := stats(t, d); s.Refused != 1 || s.InFlight != 1 {
		t.Errorf("stats %+v, want 1 refused, 1 in flight", s)
	}
	close(b.release)
	if err := <-first; err != nil {
		t.Fatalf("held read: %v", err)
	}
	if got, err := collect(d, "interrupts"); err != nil || len(got) != 1 {
		t.Errorf("after the stuck read returned: %q, %v", got, err)
	}
}

// fn's error stops the read and comes back as it is; a context that ends
// stops the read at the next buffer, named with the path.
func TestReadLinesStops(t *testing.T) {
	content := strings.Repeat(strings.Repeat("c", 127)+"\n", 4096) // 512 KiB: eight reads
	dir := writeFiles(t, map[string]string{"f": content})
	stop := errors.New("enough")
	for fsName, f := range map[string]FS{"dir": Dir(dir), "fallback": onlyReadFile{Dir(dir)}} {
		n := 0
		err := ReadLines(context.Background(), f, "f", func(int, []byte) error {
			n++
			if n == 3 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || n != 3 {
			t.Errorf("%s: fn's error: %v after %d lines, want it after 3", fsName, err, n)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		n = 0
		err = ReadLines(ctx, f, "f", func(int, []byte) error { n++; return nil })
		if !errors.Is(err, context.Canceled) || n != 0 {
			t.Errorf("%s: canceled: %v after %d lines", fsName, err, n)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	err := ReadLines(ctx, Dir(dir), "f", func(int, []byte) error {
		n++
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || n == 0 || n >= 4096 || !strings.Contains(err.Error(), filepath.Join(dir, "f")) {
		t.Errorf("canceled mid-read: %v after %d of 4096 lines", err, n)
	}
}

// The real /proc/interrupts of this machine streams with the same header
// as ReadFile reads (the counts move between the two reads; the header
// does not).
func TestReadLinesRealProcInterrupts(t *testing.T) {
	proc := Dir("/proc")
	whole, err := proc.ReadFile("interrupts")
	if err != nil {
		t.Fatalf("/proc/interrupts: %v (this test needs the real /proc of a Linux host)", err)
	}
	got, err := collect(proc, "interrupts")
	if err != nil || len(got) == 0 {
		t.Fatalf("%d lines, %v", len(got), err)
	}
	if header, _, _ := strings.Cut(string(whole), "\n"); got[0] != header {
		t.Errorf("first line %q, want %q", got[0], header)
	}
}
