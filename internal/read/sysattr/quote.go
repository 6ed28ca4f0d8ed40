// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package sysattr

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxQuoted is how much of a file's content an error quotes: enough to
// recognise what is there, while a megabyte of garbage in a counter file
// must not become a megabyte log line on every scrape.
const MaxQuoted = 64

// maxMessage bounds the rest of a parse error's message, for content that
// a parser embedded without quoting it: a few capped quotes and their
// context fit well below it.
const maxMessage = 1024

// Quote is %q for file content in an error message: s quoted whole when it
// is at most MaxQuoted bytes, else its first MaxQuoted bytes (never half a
// UTF-8 sequence) quoted and marked "… (N bytes)" with the full length.
func Quote(s string) string {
	if len(s) <= MaxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:runeCut(s, MaxQuoted)]) + cutMark(len(s))
}

// cutMark says how long the text that was cut was.
func cutMark(n int) string { return "… (" + strconv.Itoa(n) + " bytes)" }

// runeCut returns n, or less so that s[:n] does not end inside a UTF-8
// sequence (invalid UTF-8 is cut at n). s is longer than n.
func runeCut(s string, n int) int {
	for i := n; i > n-utf8.UTFMax && i > 0; i-- {
		if utf8.RuneStart(s[i]) {
			return i
		}
	}
	return n
}

// shorten bounds an error message that may carry file content: each
// double-quoted string in it (as %q and strconv write them) longer than
// MaxQuoted is requoted by Quote, and what is still over maxMessage is cut
// with a marker. One pass: a scan that finds no closing quote resumes
// where it stopped.
func shorten(msg string) string {
	if len(msg) <= MaxQuoted+2 {
		return msg // nothing in it can be a long quote
	}
	var b strings.Builder
	for i := 0; i < len(msg); {
		j := strings.IndexByte(msg[i:], '"')
		if j < 0 {
			b.WriteString(msg[i:])
			break
		}
		b.WriteString(msg[i : i+j])
		i += j
		end, ok := closingQuote(msg, i)
		if !ok {
			b.WriteString(msg[i:end])
			i = end
			continue
		}
		b.WriteString(requote(msg[i : end+1]))
		i = end + 1
	}
	out := b.String()
	if len(out) > maxMessage {
		out = out[:runeCut(out, maxMessage)] + cutMark(len(out))
	}
	return out
}

// closingQuote finds the quote that closes the Go string opened at
// msg[open]: its index and true, or where the scan stopped (a newline, or
// the end) and false. Escapes are skipped, not checked: requote checks.
func closingQuote(msg string, open int) (int, bool) {
	for k := open + 1; k < len(msg); k++ {
		switch msg[k] {
		case '\\':
			k++
		case '"':
			return k, true
		case '\n':
			return k, false
		}
	}
	return len(msg), false
}

// requote returns a quoted string as it is, or by Quote when what it
// quotes is longer than MaxQuoted.
func requote(q string) string {
	if len(q) <= MaxQuoted+2 {
		return q
	}
	s, err := strconv.Unquote(q)
	if err != nil || len(s) <= MaxQuoted {
		return q
	}
	return Quote(s)
}
