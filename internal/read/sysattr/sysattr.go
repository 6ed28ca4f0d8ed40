// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package sysattr is how the readers of host state turn sysfs and procfs
// attributes into values: read, parse, and keep what went wrong next to
// the value, which is then missing rather than zero.
package sysattr

import (
	"errors"
	"io/fs"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// Opt is a value that may be missing: a file that does not exist on this
// driver or could not be read or parsed. A missing value is never zero.
type Opt[T any] struct {
	V  T
	OK bool
	// Empty: the file exists and reads as only a newline, the kernel's
	// way of printing an attribute the driver has no value for (qib,
	// rxe and siw have an empty fw_ver). The value is missing (OK is
	// false) and no error was reported. Only the OrEmpty readers set
	// it; for the others such a file is content like any other.
	Empty bool
}

// Some is a value that is there.
func Some[T any](v T) Opt[T] { return Opt[T]{V: v, OK: true} }

// ParseError is a file that was read but whose content is not in the
// kernel's format.
type ParseError struct {
	Path string
	Err  error
}

// Error quotes at most MaxQuoted bytes of each string quoted in Err (a
// strconv error quotes the whole text it was given) and bounds the rest,
// so a file of garbage makes a short message.
func (e *ParseError) Error() string { return "parse " + e.Path + ": " + shorten(e.Err.Error()) }
func (e *ParseError) Unwrap() error { return e.Err }

// Text reads an attribute, trimmed of white space. A missing file that is
// not required is no error (drivers differ in what they create); any other
// failure goes to fail.
func Text(f hostfs.FS, name string, required bool, fail func(error)) (string, bool) {
	s, read, _ := TextOrEmpty(f, name, required, fail)
	return s, read
}

// TextOrEmpty is Text that also tells an attribute that is empty by
// design: a file that reads as only white space ending in a newline ("\n")
// gives "", true, true. A file of zero bytes is not: the kernel prints a
// newline even for an empty value, so nothing at all is a truncated or
// foreign file, and gives "", true, false like any text.
func TextOrEmpty(f hostfs.FS, name string, required bool, fail func(error)) (text string, read, empty bool) {
	b, err := f.ReadFile(name)
	if err != nil {
		if required || !errors.Is(err, fs.ErrNotExist) {
			fail(err)
		}
		return "", false, false
	}
	text = strings.TrimSpace(string(b))
	return text, true, text == "" && len(b) > 0 && b[len(b)-1] == '\n'
}

// Parse turns an attribute's text into a value. read false (the file was
// missing, or its error already reported) gives a missing value; content
// parse rejects is reported to fail as a *ParseError naming path(), which
// is only called then (a scrape parses hundreds of attributes).
func Parse[T any](text string, read bool, parse func(string) (T, error), fail func(error), path func() string) Opt[T] {
	if !read {
		return Opt[T]{}
	}
	v, err := parse(text)
	if err != nil {
		fail(&ParseError{Path: path(), Err: err})
		return Opt[T]{}
	}
	return Some(v)
}

// ParseOrEmpty is Parse for text from TextOrEmpty: an attribute empty by
// design is an Opt with Empty set, without calling parse or fail.
func ParseOrEmpty[T any](text string, read, empty bool, parse func(string) (T, error), fail func(error), path func() string) Opt[T] {
	if empty {
		return Opt[T]{Empty: true}
	}
	return Parse(text, read, parse, fail, path)
}

// Dir reads the attributes of one directory (a device, a port, a PCI
// function) and keeps the errors met. One goroutine uses it.
type Dir struct {
	FS hostfs.FS
	// Path is the directory below the FS root; it may be changed to read
	// a subdirectory.
	Path string
	Errs []error
}

// Fail keeps an error.
func (d *Dir) Fail(err error) { d.Errs = append(d.Errs, err) }

// Text reads an attribute of the directory (Text above).
func (d *Dir) Text(name string, required bool) (string, bool) {
	return Text(d.FS, d.Path+"/"+name, required, d.Fail)
}

// Get reads and parses an attribute of the directory.
func Get[T any](d *Dir, name string, required bool, parse func(string) (T, error)) Opt[T] {
	p := d.Path + "/" + name
	s, ok := Text(d.FS, p, required, d.Fail)
	return Parse(s, ok, parse, d.Fail, func() string { return p })
}

// GetOrEmpty is Get for an attribute that a driver may leave empty by
// design (TextOrEmpty): such a file gives an Opt with Empty set and no
// error; anything else is read and parsed as by Get.
func GetOrEmpty[T any](d *Dir, name string, required bool, parse func(string) (T, error)) Opt[T] {
	p := d.Path + "/" + name
	s, read, empty := TextOrEmpty(d.FS, p, required, d.Fail)
	return ParseOrEmpty(s, read, empty, parse, d.Fail, func() string { return p })
}

// ErrorPath is the file an error names: a *ParseError's or an
// *fs.PathError's path, "" for any other error. The one place that knows
// how the readers spell an error's file, so a check can find the error of
// the value it judges.
func ErrorPath(err error) string {
	var pe *ParseError
	var fe *fs.PathError
	switch {
	case errors.As(err, &pe):
		return pe.Path
	case errors.As(err, &fe):
		return fe.Path
	}
	return ""
}
