// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestDirReadFile(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"short": "400 Gb/sec (4X NDR)\n",
		"empty": "",
		"large": strings.Repeat("x", 10000),
		"exact": strings.Repeat("y", 128),
		"over":  strings.Repeat("z", 129),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := Dir(dir).ReadFile(name)
		if err != nil || string(got) != content {
			t.Errorf("ReadFile(%s) = %d bytes, %v; want %d bytes", name, len(got), err, len(content))
		}
	}
	if _, err := Dir(dir).ReadFile("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
	if _, err := Dir(dir).ReadFile("."); err == nil {
		t.Error("reading a directory: want error")
	}
}

func TestDirReadFileTooLarge(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "huge"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxFileSize + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := Dir(dir).ReadFile("huge"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("huge file: %v, want ErrTooLarge", err)
	}
	if err := os.Truncate(filepath.Join(dir, "huge"), MaxFileSize); err != nil {
		t.Fatal(err)
	}
	if b, err := Dir(dir).ReadFile("huge"); err != nil || len(b) != MaxFileSize {
		t.Errorf("file of exactly MaxFileSize: %d bytes, %v", len(b), err)
	}
}

// The read buffer doubles, but never past one byte over MaxFileSize: a
// file over the limit is refused without a buffer twice its size.
func TestGrow(t *testing.T) {
	for c := 128; c <= MaxFileSize; c *= 2 {
		got := cap(grow(make([]byte, c)))
		if want := min(2*c, MaxFileSize+1); got != want {
			t.Errorf("grow(cap %d) = cap %d, want %d", c, got, want)
		}
	}
	if got := cap(grow(make([]byte, MaxFileSize))); got != MaxFileSize+1 {
		t.Errorf("grow at the limit = cap %d, want %d", got, MaxFileSize+1)
	}
}

// answer runs read in a goroutine and returns its error, failing the test
// if it never returns: the guard is a minute, so it fails only on a read
// that blocks.
func answer(t *testing.T, what string, read func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- read() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s: still blocked after a minute", what)
		return nil
	}
}

// A FIFO in place of an attribute, with no writer or with a writer that
// never writes, is refused as not a regular file instead of blocking the
// open or the read; so are the other reads of a FIFO and a character
// device. An empty regular file still reads as empty.
func TestDirSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"fifo", "fifo_written"} {
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// O_RDWR opens a FIFO without waiting for a reader: a writer that
	// is there and never writes.
	w, err := os.OpenFile(filepath.Join(dir, "fifo_written"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d := Dir(dir)
	for _, name := range []string{"fifo", "fifo_written"} {
		err := answer(t, "ReadFile("+name+")", func() error { _, err := d.ReadFile(name); return err })
		var pe *fs.PathError
		if !errors.Is(err, ErrNotRegular) || !errors.As(err, &pe) || pe.Path != filepath.Join(dir, name) {
			t.Errorf("ReadFile(%s): %v, want %v naming the path", name, err, ErrNotRegular)
		}
		err = answer(t, "ReadTail("+name+")", func() error { _, err := ReadTail(d, name, 100); return err })
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("ReadTail(%s): %v, want %v", name, err, ErrNotRegular)
		}
		err = answer(t, "ReadDir("+name+")", func() error { _, err := d.ReadDir(name); return err })
		if !errors.Is(err, syscall.ENOTDIR) {
			t.Errorf("ReadDir(%s): %v, want ENOTDIR", name, err)
		}
	}
	if b, err := d.ReadFile("empty"); err != nil || b == nil || len(b) != 0 {
		t.Errorf("empty regular file: %q, %v", b, err)
	}
	if _, err := os.Stat("/dev/null"); err == nil {
		if _, err := Dir("/dev").ReadFile("null"); !errors.Is(err, ErrNotRegular) {
			t.Errorf("/dev/null: %v, want %v", err, ErrNotRegular)
		}
	}
}

func TestDirLinksAndDirs(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "devices/pci0000:00/0000:00:01.0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("devices/pci0000:00/0000:00:01.0", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	target, err := Dir(dir).ReadLink("link")
	if err != nil || target != "devices/pci0000:00/0000:00:01.0" {
		t.Errorf("ReadLink = %q, %v", target, err)
	}
	entries, err := Dir(dir).ReadDir("link")
	if err != nil || len(entries) != 0 {
		t.Errorf("ReadDir through link = %v, %v", entries, err)
	}
	// A symlink loop must fail, not hang.
	if err := os.Symlink("loop", filepath.Join(dir, "loop")); err != nil {
		t.Fatal(err)
	}
	if _, err := Dir(dir).ReadFile("loop"); err == nil {
		t.Error("symlink loop: want error")
	}
}

func TestPathsResolve(t *testing.T) {
	root := t.TempDir()
	p, err := Paths{Rootfs: root}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if p.Sysfs != filepath.Join(root, "sys") || p.Procfs != filepath.Join(root, "proc") {
		t.Errorf("Resolve = %+v", p)
	}
	other := t.TempDir()
	p, err = Paths{Rootfs: root, Sysfs: other}.Resolve()
	if err != nil || p.Sysfs != other {
		t.Errorf("explicit sysfs: %+v, %v", p, err)
	}
	// A missing sys below the root is a fixture's business; a missing
	// --path.sysfs or --path.procfs given explicitly is a typo.
	for _, p := range []Paths{{Rootfs: root, Sysfs: "/x/sys"}, {Rootfs: root, Procfs: filepath.Join(root, "prok")}} {
		if _, err := p.Resolve(); err == nil || !strings.Contains(err.Error(), "--path.") {
			t.Errorf("%+v: %v, want an error naming the flag", p, err)
		}
	}
	if _, err := (Paths{Rootfs: filepath.Join(root, "nope")}).Resolve(); err == nil {
		t.Error("missing rootfs: want error")
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (Paths{Rootfs: file}).Resolve(); err == nil {
		t.Error("rootfs is a file: want error")
	}
	if _, err := (Paths{Rootfs: root, Sysfs: file}).Resolve(); err == nil {
		t.Error("sysfs is a file: want error")
	}
}

// onlyReadFile hides Dir's TailReader: the fallback a test double gets.
type onlyReadFile struct{ FS }

// ReadTail reads the end of a file from its first whole line, never more
// than asked, through Dir and through the fallback alike.
func TestReadTail(t *testing.T) {
	dir := t.TempDir()
	log := "line one\nline two\nline three\n"
	if err := os.WriteFile(filepath.Join(dir, "log"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("0123456789abcde\n", 2<<20) // 32 MiB, over MaxFileSize
	if err := os.WriteFile(filepath.Join(dir, "big"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]FS{"dir": Dir(dir), "fallback": onlyReadFile{Dir(dir)}} {
		for _, tc := range []struct {
			n    int64
			want string
		}{
			{1 << 20, log},         // all of it
			{int64(len(log)), log}, // exactly all
			{15, "line three\n"},   // cut inside "line two": dropped
			{11, "line three\n"},   // starts right after a newline: kept
			{10, ""},               // inside the last line: nothing whole
		} {
			got, err := ReadTail(f, "log", tc.n)
			if err != nil || string(got) != tc.want {
				t.Errorf("%s: ReadTail(log, %d) = %q, %v; want %q", name, tc.n, got, err, tc.want)
			}
		}
		if _, err := ReadTail(f, "missing", 10); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: missing: %v", name, err)
		}
	}
	got, err := ReadTail(Dir(dir), "big", 1<<20)
	if err != nil || int64(len(got)) > 1<<20 || !strings.HasPrefix(string(got), "0123456789abcde\n") || !strings.HasSuffix(big, string(got)) {
		t.Errorf("big: %d bytes, %v", len(got), err)
	}
	if _, err := ReadTail(Dir(dir), ".", 10); err == nil {
		t.Error("a directory: want an error")
	}
}
