// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package opensm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
)

// recordedLog is a real opensm 3.3.23 log (on ibsim; fixtures/README.md).
func recordedLog(t testing.TB, name string) []byte { return hostfstest.Tool(t, name) }

var logNow = time.Date(2026, 11, 30, 20, 0, 0, 0, time.UTC)

func TestParseLogRecorded(t *testing.T) {
	at := func(s string, us int) time.Time {
		v, err := time.Parse("2006 Jan 02 15:04:05", "2026 "+s)
		if err != nil {
			t.Fatal(err)
		}
		return v.Add(time.Duration(us) * time.Microsecond)
	}
	m := ParseLog("/var/log/opensm.log", recordedLog(t, "opensm-master-ibsim.log"), logNow)
	if !m.SubnetUp.Equal(at("Nov 30 16:39:11", 408113)) || m.State != "MASTER" || !m.StateTime.Equal(at("Nov 30 16:39:11", 392301)) ||
		m.Errors != 0 || m.Lines != 14 || m.Unparsed != 0 {
		t.Errorf("master: %+v", m)
	}
	s := ParseLog("/var/log/opensm.log", recordedLog(t, "opensm-standby-ibsim.log"), logNow)
	if !s.SubnetUp.IsZero() || s.State != "STANDBY" || s.Errors != 1 || s.Unparsed != 0 ||
		s.LastError != "log_send_error: ERR 5411: DR SMP Send completed with error (IB_TIMEOUT) -- dropping" ||
		!s.LastErrorTime.Equal(at("Nov 30 16:39:51", 535506)) {
		t.Errorf("standby: %+v", s)
	}
}

// Values after key names are redacted whatever their shape; partition
// keys are not secrets. Each form of the issue, and the ones handled
// before.
func TestRedactKeys(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"SA_Key with colon; P_Key and pkey kept",
			"ERR 0507: P_Key 0x8001 rejected, pkey=0x7fff, SA_Key: 77",
			"ERR 0507: P_Key 0x8001 rejected, pkey=0x7fff, SA_Key: <redacted>"},
		{"several keys on a line",
			"SM_Key 0xdeadbeef, m_key=12, smkey 0x1",
			"SM_Key <redacted>, m_key=<redacted>, smkey <redacted>"},
		{"a bare Key at the start; a word after a key name is taken for a value",
			"Key 5 at line start, no key here",
			"Key <redacted> at line start, no key <redacted>"},
		{"opensm 2F18 (osm_sminfo_rcv.c): prose after the value stays",
			"ERR 2F18: Got SM (LID 5) with sm_key 0x00000000deadbeef that doesn't match our local sm_key. Ignoring SMInfo",
			"ERR 2F18: Got SM (LID 5) with sm_key <redacted> that doesn't match our local sm_key. Ignoring SMInfo"},
		{"opensm 4608 (osm_sa_pkey_record.c)",
			"ERR 4608: Ignoring PKeyRecord request from non-trusted requester with SM_Key 0x0000000000000001",
			"ERR 4608: Ignoring PKeyRecord request from non-trusted requester with SM_Key <redacted>"},
		{"a second value",
			"m_key 0x1 0x2 mismatch", "m_key <redacted> <redacted> mismatch"},
		{"a second value after a comma, a pair with a slash as one; after a word, no more",
			"M_Keys 0x11, 0x22/0x33 rejected, 0x44 / 0x55", "M_Keys <redacted>, <redacted> rejected, 0x44 / 0x55"},
		{"a second value after a spaced slash",
			"sm_key 0x1 / 0x2 differ", "sm_key <redacted> / <redacted> differ"},
		{"a second value of hex letters only",
			"sm_key 0x1 deadbeef from port 3", "sm_key <redacted> <redacted> from port 3"},
		{"spaces around =",
			"m_key  =  0xdeadbeef", "m_key  =  <redacted>"},
		{"tab and colon",
			"sa_key\t:\t0x42 set", "sa_key\t:\t<redacted> set"},
		{"hex without 0x",
			"SM_Key deadbeefcafe rejected", "SM_Key <redacted> rejected"},
		{"hex without 0x, digits first",
			"m_key=12ab34cd", "m_key=<redacted>"},
		{"upper case name and value",
			"M_KEY 0XDEADBEEF, CC_KEY=ABCDEF", "M_KEY <redacted>, CC_KEY=<redacted>"},
		{"bracketed and quoted values",
			"SM_Key (0x1234) and mkey \"0xabcd\"", "SM_Key (<redacted>) and mkey \"<redacted>\""},
		{"a value ending the sentence",
			"bad MKey 0x99. Retrying", "bad MKey <redacted>. Retrying"},
		{"M_Key in a security trap (osm_inform.c)",
			"Reporting Security Notice \"Bad M_Key\" from LID 3, GUID 0x0002c90300a0b1c2, Method 0x1, Attribute 0x15, AttrMod 0x0, M_Key 0x0123456789abcdef",
			"Reporting Security Notice \"Bad M_Key\" from LID 3, GUID 0x0002c90300a0b1c2, Method 0x1, Attribute 0x15, AttrMod 0x0, M_Key <redacted>"},
		{"option names that only contain key are not keys",
			"m_key_lease_period 60, keep_pkey_indexes TRUE", "m_key_lease_period 60, keep_pkey_indexes TRUE"},
		{"a key name with nothing after it",
			"no sm_key", "no sm_key"},
	} {
		if got := redactKeys(tc.in); got != tc.want {
			t.Errorf("%s: redactKeys(%q)\n = %q\nwant %q", tc.name, tc.in, got, tc.want)
		}
	}
}

// Every key name form with every separator and every value shape, first
// or second on the line (a second value has a digit: a second token of
// letters only is taken for prose), before prose or at the end: the value
// never survives.
func TestRedactKeysNeverLeaks(t *testing.T) {
	names := []string{"SM_Key", "sm_key", "m_key", "M_KEY", "MKey", "smkey", "sa_key", "cc_key", "Key", "M_Keys", "vendor_key"}
	seps := []string{" ", "=", ": ", "  =  ", "\t", " = (", ":\""}
	values := []string{"0x00000000deadbeef", "0XDEADBEEF", "deadbeefcafe", "12ab34cd", "77", "SeCrEt-Value_9", "zz99"}
	for _, n := range names {
		for _, sep := range seps {
			for _, v := range values {
				for _, msg := range []string{
					"ERR 0001: " + n + sep + v,
					n + sep + v + " that doesn't match",
					"x " + n + sep + "0x1 " + v + ", and more",
					"x " + n + sep + "0x1, " + v,
					"x " + n + sep + v + ". Ignoring",
				} {
					got := redactKeys(msg)
					if strings.Contains(got, v) {
						t.Errorf("redactKeys(%q) = %q: %q survives", msg, got, v)
					}
				}
			}
		}
	}
}

func TestParseLogEdges(t *testing.T) {
	log := strings.Join([]string{
		"Dec 31 23:59:58 000001 [AB7D9740] 0x80 -> Entering MASTER state",
		"Jan 01 00:00:03 000002 [AB7D9740] 0x02 -> SUBNET UP",
		"Jan  1 00:00:30 000003 [AB7D9740] 0x01 -> osm_pkey_mgr: ERR 0507: P_Key 0x8001 of port 0x10001 rejected, pkey=0x7fff, SA_Key: 77",
		"Jan  1 00:01:00 000003 [AB7D9740] 0x01 -> osm_x: ERR 3A02: bad SM_Key 0x00000000deadbeef from port, m_key=123456 " + strings.Repeat("é", 200),
		"\tcontinuation of it",
		"Feb 30 00:00:00 000000 [AB7D9740] 0x02 -> not a date",
		"garbage",
		"Jan 01 00:02:00 000004 [AB7D9740] 0x01 -> log_trap_info: Received Generic Notice type:1 num:128",
		"",
	}, "\n")
	l := ParseLog("/x", []byte(log), time.Date(2027, 1, 1, 0, 5, 0, 0, time.UTC))
	if l.StateTime.Year() != 2026 || l.SubnetUp.Year() != 2027 || l.State != "MASTER" {
		t.Errorf("New Year: state %v, subnet up %v", l.StateTime, l.SubnetUp)
	}
	if l.Errors != 2 || l.Lines != 5 || l.Unparsed != 2 {
		t.Errorf("errors %d lines %d unparsed %d", l.Errors, l.Lines, l.Unparsed)
	}
	if strings.Contains(l.LastError, "deadbeef") || strings.Contains(l.LastError, "123456") ||
		!strings.Contains(l.LastError, "SM_Key <redacted>") || len(l.LastError) > maxErrorText+len("…") || !strings.HasSuffix(l.LastError, "…") {
		t.Errorf("last error %q", l.LastError)
	}
}

// Read reads the end of each running opensm's log: -f first, then
// log_file, then the default; a missing log is no error.
func TestReadLogs(t *testing.T) {
	root := writeTree(t, map[string]string{
		"proc/812/comm":          "opensm\n",
		"proc/812/cmdline":       "/usr/sbin/opensm\x00-g\x000x1\x00-f\x00/var/log/opensm.0x1.log\x00",
		"proc/813/comm":          "opensm\n",
		"proc/813/cmdline":       "/usr/sbin/opensm\x00-g\x000x2\x00",
		"proc/814/comm":          "opensm\n",
		"proc/814/cmdline":       "/usr/sbin/opensm\x00-g\x000x3\x00",
		"etc/opensm/opensm.conf": "log_file /var/log/sm/opensm.log\n",
		"var/log/opensm.0x1.log": string(recordedLog(t, "opensm-master-ibsim.log")),
		"var/log/sm/opensm.log":  string(recordedLog(t, "opensm-standby-ibsim.log")),
		"var/log/opensm.log":     "not read: log_file names another\n",
	})
	st, err := Read(context.Background(), hostfs.Dir(root), hostfs.Dir(filepath.Join(root, "proc")), "", logNow, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.LogFiles(); strings.Join(got, " ") != "/var/log/opensm.0x1.log /var/log/sm/opensm.log" {
		t.Errorf("log files %v", got)
	}
	if len(st.Logs) != 2 || st.Logs[0].State != "MASTER" || st.Logs[1].State != "STANDBY" {
		t.Fatalf("logs %+v", st.Logs)
	}
	if err := os.Remove(filepath.Join(root, "var/log/sm/opensm.log")); err != nil {
		t.Fatal(err)
	}
	st, err = Read(context.Background(), hostfs.Dir(root), hostfs.Dir(filepath.Join(root, "proc")), "", logNow, nil)
	if err != nil || len(st.Logs) != 1 {
		t.Errorf("a missing log: %d logs, %v", len(st.Logs), err)
	}
}

func FuzzParseLog(f *testing.F) {
	f.Add(recordedLog(f, "opensm-master-ibsim.log"))
	f.Add(recordedLog(f, "opensm-standby-ibsim.log"))
	f.Fuzz(func(t *testing.T, b []byte) {
		l := ParseLog("/x", b, logNow)
		if l.Lines+l.Unparsed > strings.Count(string(b), "\n")+1 || l.Errors > l.Lines || len(l.LastError) > maxErrorText+len("…") {
			t.Fatalf("%+v", l)
		}
		if !l.SubnetUp.IsZero() && l.SubnetUp.After(logNow.Add(24*time.Hour)) {
			t.Fatalf("a line placed in the future: %v", l.SubnetUp)
		}
	})
}

// TestLogReaderIncremental: a second read parses only the lines added
// (their counts add to the first read's, the newest state and error win);
// a rotated log is parsed afresh; a log no process names is forgotten.
func TestLogReaderIncremental(t *testing.T) {
	master := string(recordedLog(t, "opensm-master-ibsim.log"))
	root := writeTree(t, map[string]string{
		"proc/812/comm":      "opensm\n",
		"proc/812/cmdline":   "/usr/sbin/opensm\x00-f\x00/var/log/opensm.log\x00",
		"var/log/opensm.log": master,
	})
	rootFS, procFS := hostfs.Dir(root), hostfs.Dir(filepath.Join(root, "proc"))
	logs := &LogReader{}
	read := func() *Log {
		t.Helper()
		st, err := Read(context.Background(), rootFS, procFS, "", logNow, logs)
		if err != nil || len(st.Logs) != 1 {
			t.Fatalf("%d logs, %v", len(st.Logs), err)
		}
		return st.Logs[0]
	}
	first := read()
	whole := ParseLog("/var/log/opensm.log", []byte(master), logNow)
	if *first != *whole {
		t.Fatalf("first read %+v, want the tail's %+v", first, whole)
	}
	added := "Nov 30 19:58:01 000001 [A87D26C0] 0x01 -> osm_sm_mad_ctrl_rcv_callback: ERR 3111: Error from SM MAD key=0x1234\n" +
		"Nov 30 19:58:02 000002 [A87D26C0] 0x02 -> Entering STANDBY state\n"
	log := filepath.Join(root, "var/log/opensm.log")
	fh, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteString(added); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	second := read()
	if second.Lines != first.Lines+2 || second.Errors != first.Errors+1 || second.State != "STANDBY" ||
		!strings.Contains(second.LastError, "ERR 3111") || second.SubnetUp != first.SubnetUp {
		t.Errorf("after two lines appended: %+v (first %+v)", second, first)
	}
	if strings.Contains(second.LastError, "1234") {
		t.Errorf("the key leaked: %q", second.LastError)
	}
	// Rotated: the new file alone.
	if err := os.Rename(log, log+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log, []byte(added), 0o644); err != nil {
		t.Fatal(err)
	}
	if third := read(); third.Lines != 2 || third.Errors != 1 || !third.SubnetUp.IsZero() {
		t.Errorf("after rotation: %+v, want only the new file's 2 lines", third)
	}
	logs.forget(nil)
	if len(logs.cursors) != 0 {
		t.Errorf("cursors kept for logs nobody names: %v", logs.cursors)
	}
}
