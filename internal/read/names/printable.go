// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package names

import (
	"strconv"
	"unicode/utf8"
)

// Printable returns s fit to print on a terminal: every character a
// terminal could act on is shown escaped instead, so host text (a device
// or netdev name, a node description, an opensm log line) cannot retitle,
// clear or recolour the operator's terminal, nor hide what follows it.
// Escaped, never dropped: what the host holds stays visible.
//
//   - C0 controls but tab and newline (ESC, BEL, CR, ...) and DEL: \x1b
//   - C1 controls (U+0080 to U+009F; U+009B is CSI on some terminals) and
//     the bidirectional overrides and isolates (U+202A to U+202E, U+2066
//     to U+2069), which reorder what is shown: \u009b
//   - bytes that are not UTF-8 (a C1 control to a terminal in an 8-bit
//     mode): \xff
//
// Tab and newline stay: the renderers lay lines out with them, and they
// move the cursor, nothing more. A backslash is not escaped, so a host
// string that spells \x1b itself reads the same as an escaped ESC; the
// JSON output has the exact bytes.
func Printable(s string) string {
	i := 0
	for i < len(s) {
		c := s[i]
		if c >= 0x20 && c < 0x7f || c == '\t' || c == '\n' {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			break
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if unprintable(r, n) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	b := make([]byte, 0, len(s)+16)
	b = append(b, s[:i]...)
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\t' && c != '\n' || c == 0x7f {
				b = appendHex(b, c)
			} else {
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = appendHex(b, c)
		case unprintable(r, n):
			b = append(b, `\u`...)
			h := strconv.FormatUint(uint64(r), 16)
			for range 4 - len(h) {
				b = append(b, '0')
			}
			b = append(b, h...)
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return string(b)
}

// unprintable reports whether the rune r, n bytes long, is escaped: a
// byte that is not UTF-8, a C1 control, a bidirectional override.
func unprintable(r rune, n int) bool {
	return r == utf8.RuneError && n == 1 || r >= 0x80 && r <= 0x9f ||
		r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

func appendHex(b []byte, c byte) []byte {
	const digits = "0123456789abcdef"
	return append(b, '\\', 'x', digits[c>>4], digits[c&0xf])
}
