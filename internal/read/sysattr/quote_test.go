// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package sysattr

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// Quote quotes short content whole and cuts long content at MaxQuoted
// bytes, never inside a UTF-8 sequence, saying how long it was.
func TestQuote(t *testing.T) {
	x64 := strings.Repeat("x", 64)
	for _, tc := range []struct{ in, want string }{
		{"lots", `"lots"`},
		{"a\x00b\n", `"a\x00b\n"`},
		{x64, `"` + x64 + `"`},
		{x64 + "y", `"` + x64 + `"… (65 bytes)`},
		{x64[:63] + "é", `"` + x64[:63] + `"… (65 bytes)`},
	} {
		if got := Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%.20q…) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// A parse error quotes at most MaxQuoted bytes of the file whatever the
// parser quoted, bounds content embedded unquoted, leaves short messages
// alone, and still unwraps to the parser's error.
func TestParseErrorBoundsContent(t *testing.T) {
	big := strings.Repeat("garbage ", 1<<17) // 1 MiB
	head := `"` + big[:64] + `"… (1048576 bytes)`
	parseUint := func(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) }
	counter := func(s string) (uint64, error) {
		return 0, fmt.Errorf("counter %q: not an unsigned integer", s)
	}
	var errs []error
	fail := func(err error) { errs = append(errs, err) }
	path := func() string { return "/sys/big" }
	Parse(big, true, parseUint, fail, path)
	Parse(big, true, counter, fail, path)
	if len(errs) != 2 {
		t.Fatalf("errors %d, want 2", len(errs))
	}
	if want := "parse /sys/big: strconv.ParseUint: parsing " + head + ": invalid syntax"; errs[0].Error() != want {
		t.Errorf("ParseUint: %.200q, want %q", errs[0].Error(), want)
	}
	if want := "parse /sys/big: counter " + head + ": not an unsigned integer"; errs[1].Error() != want {
		t.Errorf("%%q: %.200q, want %q", errs[1].Error(), want)
	}
	var ne *strconv.NumError
	if !errors.As(errs[0], &ne) || ne.Num != big {
		t.Error("the parser's error is no longer reachable whole")
	}

	prefix := "parse /sys/big: "
	for name, err := range map[string]error{
		"unquoted":         fmt.Errorf("bad: %s", big),
		"unclosed quote":   fmt.Errorf("bad: \"%s", big),
		"escaped quotes":   fmt.Errorf("bad: %s", strings.Repeat(`\"`, 1<<19)),
		"newline in quote": fmt.Errorf("bad: \"%s\n%s\"", big, big),
	} {
		msg := (&ParseError{Path: "/sys/big", Err: err}).Error()
		if len(msg) > len(prefix)+maxMessage+len("… (2097162 bytes)") || !strings.HasPrefix(msg, prefix+"bad: ") || !strings.HasSuffix(msg, " bytes)") {
			t.Errorf("%s: %d bytes: %.100q…", name, len(msg), msg)
		}
	}

	short := (&ParseError{Path: "/sys/x", Err: errors.New(`a "b" "c`)}).Error()
	if short != `parse /sys/x: a "b" "c` {
		t.Errorf("short message changed: %q", short)
	}
}
