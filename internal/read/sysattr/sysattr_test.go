// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package sysattr

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
)

// Text and Parse: a value, a missing optional file (no error), a missing
// required one, an unreadable one and unparsable content (errors naming
// the file), each a missing value, never a zero.
func TestTextAndParse(t *testing.T) {
	dir := t.TempDir()
	for name, v := range map[string]string{"rate": "400\n", "bad": "lots\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := &hostfstest.Faulty{Base: hostfs.Dir(dir), Errors: map[string]error{"eio": syscall.EIO}}
	var errs []error
	fail := func(err error) { errs = append(errs, err) }
	get := func(name string, required bool) Opt[uint64] {
		s, ok := Text(f, name, required, fail)
		return Parse(s, ok, func(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) }, fail, func() string { return "/sys/" + name })
	}
	if v := get("rate", true); v != Some(uint64(400)) || len(errs) != 0 {
		t.Errorf("rate: %+v, %v", v, errs)
	}
	if v := get("missing", false); v.OK || len(errs) != 0 {
		t.Errorf("optional missing: %+v, %v", v, errs)
	}
	if v := get("missing", true); v.OK || len(errs) != 1 || !errors.Is(errs[0], fs.ErrNotExist) {
		t.Errorf("required missing: %+v, %v", v, errs)
	}
	errs = nil
	if v := get("eio", false); v.OK || len(errs) != 1 || !errors.Is(errs[0], syscall.EIO) {
		t.Errorf("EIO: %+v, %v", v, errs)
	}
	errs = nil
	var pe *ParseError
	if v := get("bad", true); v.OK || len(errs) != 1 || !errors.As(errs[0], &pe) || pe.Path != "/sys/bad" ||
		errs[0].Error() != `parse /sys/bad: strconv.ParseUint: parsing "lots": invalid syntax` {
		t.Errorf("bad: %+v, %v", v, errs)
	}
}

// Dir reads below its path, which may move to a subdirectory, and keeps
// every error with the path it names.
func TestDir(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "dev/ports/1"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"dev/fw_ver": " 28.39.1002\n", "dev/ports/1/lid": "x\n"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := &Dir{FS: hostfs.Dir(root), Path: "dev"}
	if v := Get(d, "fw_ver", true, func(s string) (string, error) { return s, nil }); v != Some("28.39.1002") {
		t.Errorf("fw_ver %+v", v)
	}
	d.Path = "dev/ports/1"
	if v := Get(d, "lid", true, func(s string) (uint64, error) { return strconv.ParseUint(s, 0, 16) }); v.OK {
		t.Errorf("lid %+v", v)
	}
	if _, ok := d.Text("state", true); ok {
		t.Error("a missing required file read")
	}
	var pe *ParseError
	if len(d.Errs) != 2 || !errors.As(d.Errs[0], &pe) || pe.Path != "dev/ports/1/lid" || !errors.Is(d.Errs[1], fs.ErrNotExist) {
		t.Errorf("errors %v", d.Errs)
	}
}

// An attribute that reads as a bare newline is empty by design: the
// OrEmpty readers give Empty and no error, telling it from a missing,
// unreadable or zero-byte file; Get still hands it to the parser.
func TestEmptyByDesign(t *testing.T) {
	root := t.TempDir()
	for name, v := range map[string]string{"fw": "28.39.1002\n", "fw_empty": "\n", "fw_blank": " \n", "fw_zero": ""} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	nonEmpty := func(s string) (string, error) {
		if s == "" {
			return "", errors.New("empty file")
		}
		return s, nil
	}
	f := &hostfstest.Faulty{Base: hostfs.Dir(root), Errors: map[string]error{"./fw_eio": syscall.EIO}}
	for _, tc := range []struct {
		name     string
		required bool
		want     Opt[string]
		errs     int
	}{
		{"fw", true, Some("28.39.1002"), 0},
		{"fw_empty", true, Opt[string]{Empty: true}, 0},
		{"fw_blank", true, Opt[string]{Empty: true}, 0},
		{"fw_zero", true, Opt[string]{}, 1}, // nothing at all: not what the kernel prints
		{"fw_missing", false, Opt[string]{}, 0},
		{"fw_missing", true, Opt[string]{}, 1},
		{"fw_eio", false, Opt[string]{}, 1},
	} {
		d := &Dir{FS: f, Path: "."}
		if got := GetOrEmpty(d, tc.name, tc.required, nonEmpty); got != tc.want || len(d.Errs) != tc.errs {
			t.Errorf("GetOrEmpty(%s, required %v) = %+v, errors %v; want %+v, %d errors", tc.name, tc.required, got, d.Errs, tc.want, tc.errs)
		}
	}
	d := &Dir{FS: f, Path: "."}
	if got := Get(d, "fw_empty", true, nonEmpty); got.OK || got.Empty || len(d.Errs) != 1 {
		t.Errorf("Get of an empty-by-design file = %+v, %v; want the parser's error", got, d.Errs)
	}
	s, read, empty := TextOrEmpty(f, "./fw_empty", true, func(err error) { t.Errorf("TextOrEmpty: %v", err) })
	if s != "" || !read || !empty {
		t.Errorf("TextOrEmpty(fw_empty) = %q, %v, %v", s, read, empty)
	}
}
