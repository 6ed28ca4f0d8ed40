// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package opensm

import (
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultLogFile is opensm's log when neither -f nor log_file names one.
const DefaultLogFile = "/var/log/opensm.log"

// LogTail is how much of the end of a log is read: a busy SM logs a trap
// line per port event, and only the recent ones are news.
const LogTail = 1 << 20

// Log is what the end of an OpenSM log says. Times are in now's location
// (opensm writes local time without a year; see ParseLog).
type Log struct {
	Path string
	// SubnetUp is the last "SUBNET UP" line: the end of a successful
	// heavy sweep. Zero when the tail has none.
	SubnetUp time.Time
	// State is the SM state of the last "Entering <STATE> state" line
	// (MASTER, STANDBY, DISCOVERING, ...), "" when the tail has none.
	State     string
	StateTime time.Time
	// Errors counts the "ERR xxxx:" lines of the tail (opensm's numbered
	// errors; traps, logged at the same level, are not counted).
	Errors int
	// LastError is the message of the last of them, any key value in it
	// replaced, and LastErrorTime its time.
	LastError     string
	LastErrorTime time.Time
	// Lines counts the tail's log lines; Unparsed those not in opensm's
	// format (continuation lines of a message are neither).
	Lines    int
	Unparsed int
}

// logLineRE is opensm's osm_log line: "Nov 30 16:39:11 408113 [A87D26C0]
// 0x02 -> SUBNET UP" (month, day, time, microseconds, thread, level).
var logLineRE = regexp.MustCompile(`^([A-Z][a-z]{2}) +([0-9]{1,2}) ([0-9]{2}):([0-9]{2}):([0-9]{2}) ([0-9]{6}) \[[0-9A-Fa-f]+\] 0x[0-9a-fA-F]{2} -> (.*)$`)

var (
	stateRE = regexp.MustCompile(`^Entering ([A-Z][A-Z ]*[A-Z]) state$`)
	errRE   = regexp.MustCompile(`\bERR [0-9A-Fa-f]{4}:`)
)

var months = map[string]time.Month{"Jan": 1, "Feb": 2, "Mar": 3, "Apr": 4, "May": 5, "Jun": 6,
	"Jul": 7, "Aug": 8, "Sep": 9, "Oct": 10, "Nov": 11, "Dec": 12}

// maxErrorText bounds LastError: a message is a line, not a dump.
const maxErrorText = 200

// ParseLog reads the end of an OpenSM log. opensm stamps lines with month,
// day and local time but no year: a line is placed in now's year, or the
// year before when that would put it more than a day after now (a log
// that spans New Year).
func ParseLog(path string, b []byte, now time.Time) *Log {
	l := &Log{Path: path}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '\t' || line[0] == ' ' {
			continue // a message's continuation
		}
		m := logLineRE.FindStringSubmatch(line)
		if m == nil {
			l.Unparsed++
			continue
		}
		t, ok := logTime(m[1:7], now)
		if !ok {
			l.Unparsed++
			continue
		}
		l.Lines++
		msg := m[7]
		switch {
		case msg == "SUBNET UP":
			l.SubnetUp = t
		case stateRE.MatchString(msg):
			l.State, l.StateTime = stateRE.FindStringSubmatch(msg)[1], t
		case errRE.MatchString(msg):
			l.Errors++
			l.LastError, l.LastErrorTime = redactKeys(msg), t
		}
	}
	return l
}

func logTime(f []string, now time.Time) (time.Time, bool) {
	mon, ok := months[f[0]]
	if !ok {
		return time.Time{}, false
	}
	n := make([]int, 5)
	for i, s := range f[1:] {
		v, err := strconv.Atoi(s)
		if err != nil {
			return time.Time{}, false
		}
		n[i] = v
	}
	day, hh, mm, ss, us := n[0], n[1], n[2], n[3], n[4]
	if day < 1 || day > 31 || hh > 23 || mm > 59 || ss > 60 {
		return time.Time{}, false
	}
	at := func(year int) time.Time {
		return time.Date(year, mon, day, hh, mm, ss, us*1000, now.Location())
	}
	t := at(now.Year())
	if t.Day() != day {
		return time.Time{}, false // Feb 30: not a date
	}
	if t.After(now.Add(24 * time.Hour)) {
		t = at(now.Year() - 1)
	}
	return t, true
}

// Redact is redactKeys for other logs shown by rdma_doctor (the kernel
// log's last messages): the one redaction and length cap every log line
// goes through before /diagnose shows it.
func Redact(msg string) string { return redactKeys(msg) }

// redactKeys replaces the values of the keys a log message names: secrets
// never leave rdma_doctor, whatever a log prints. It goes by the key's
// name, not the value's shape: after a word that names a key (SM_Key,
// m_key, sa_key, MKey, keys; see secretKeyName) and a separator (spaces,
// "=", ":", an opening bracket or quote, in any mix: "m_key  =  0x1"), the
// next token is a value whatever it looks like (hex without 0x, upper
// case, a word). Tokens that follow it, separated by spaces, commas or
// slashes, are values too while they could be one (a digit in them, or
// hex letters only: "0x1 0x2", "0x1/0x2"); the first that could not
// ("that doesn't match", "from") ends the run. Prose right after a key
// name is redacted too: a word too many is safer than a key shown.
func redactKeys(msg string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(msg); {
		if !isWordByte(msg[i]) {
			i++
			continue
		}
		j := i
		for j < len(msg) && isWordByte(msg[j]) {
			j++
		}
		if !secretKeyName(msg[i:j]) {
			i = j
			continue
		}
		k := j
		if k < len(msg) && (msg[k] == '"' || msg[k] == '\'') {
			i = j // a quote right after the name closes it: "Bad M_Key" from
			continue
		}
		for k < len(msg) && strings.IndexByte(" \t=:([\"'", msg[k]) >= 0 {
			k++
		}
		end := valueEnd(msg, k)
		if k == j || end == k {
			i = j // "local sm_key." and "sm_key" at the end name no value
			continue
		}
		b.WriteString(msg[last:k])
		b.WriteString("<redacted>")
		last = end
		for {
			s := end
			for s < len(msg) && strings.IndexByte(" \t,/", msg[s]) >= 0 {
				s++
			}
			e := valueEnd(msg, s)
			if e == s || !valueLike(msg[s:e]) {
				break
			}
			b.WriteString(msg[last:s])
			b.WriteString("<redacted>")
			last, end = e, e
		}
		i = last
	}
	b.WriteString(msg[last:])
	msg = b.String()
	if len(msg) > maxErrorText {
		n := maxErrorText
		for n > 0 && !utf8.RuneStart(msg[n]) {
			n--
		}
		msg = msg[:n] + "…"
	}
	return msg
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// secretKeyName reports whether a word names a key whose value is secret:
// it ends in "key" or "keys", any case (SM_Key, m_key, sa_key, cc_key,
// MKey, smkey, Key). A partition key (P_Key, pkey) is an address, not a
// secret, and what a partition error is about: it stays.
func secretKeyName(w string) bool {
	w = strings.ToLower(w)
	w = strings.TrimSuffix(w, "s")
	if !strings.HasSuffix(w, "key") {
		return false
	}
	stem := strings.TrimSuffix(strings.TrimSuffix(w, "key"), "_")
	return stem != "p" && !strings.HasSuffix(stem, "_p")
}

// valueEnd is the end of the token that starts at i: up to a space or a
// delimiter, without a sentence's final dot.
func valueEnd(msg string, i int) int {
	e := i
	for e < len(msg) && strings.IndexByte(" \t,;)]\"'=:", msg[e]) < 0 {
		e++
	}
	for e > i && msg[e-1] == '.' {
		e--
	}
	return e
}

// valueLike reports whether a token after a key's value could be a
// second value: a digit in it, or hex letters only.
func valueLike(tok string) bool {
	hexOnly := true
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c >= '0' && c <= '9' {
			return true
		}
		if !(c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			hexOnly = false
		}
	}
	return hexOnly
}
