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
	// keyRE finds a value after a word ending in "key" (SM_Key, m_key,
	// sa_key): secrets never leave rdma_doctor, whatever a log prints.
	keyRE = regexp.MustCompile(`(?i)(key[^0-9a-z]{0,3})(0x[0-9a-f]+|[0-9]+)`)
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

func redactKeys(msg string) string {
	var b strings.Builder
	last := 0
	for _, m := range keyRE.FindAllStringSubmatchIndex(msg, -1) {
		// A partition key (P_Key, pkey) is an address, not a secret, and
		// what a partition error is about: it stays.
		before := strings.ToLower(msg[max(0, m[0]-2):m[0]])
		if strings.HasSuffix(before, "p") || strings.HasSuffix(before, "p_") {
			continue
		}
		b.WriteString(msg[last:m[4]])
		b.WriteString("<redacted>")
		last = m[5]
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
