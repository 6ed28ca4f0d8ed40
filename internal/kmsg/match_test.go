// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package kmsg

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

type recorded struct {
	event, subject, msg string
	line                int
}

func loadRecorded(t testing.TB) []recorded {
	t.Helper()
	f, err := os.Open("testdata/recorded.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []recorded
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		parts := strings.SplitN(l, "\t", 3)
		if len(parts) != 3 {
			t.Fatalf("recorded.txt:%d: want event, subject and message separated by tabs", n)
		}
		out = append(out, recorded{parts[0], parts[1], parts[2], n})
	}
	return out
}

func subjectString(s Subject) string {
	var p []string
	if s.PCI != "" {
		p = append(p, "pci="+s.PCI)
	}
	if s.Netdev != "" {
		p = append(p, "netdev="+s.Netdev)
	}
	if s.IBDev != "" {
		p = append(p, "ibdev="+s.IBDev)
	}
	if len(p) == 0 {
		return "-"
	}
	return strings.Join(p, ",")
}

// TestRecordedMessages matches every recorded real message: each one finds
// its event and the subject it names; the lines that mean nothing match
// nothing.
func TestRecordedMessages(t *testing.T) {
	m, err := NewMatcher(Events)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range loadRecorded(t) {
		ix, subj := m.Match([]byte(r.msg))
		got := "-"
		if ix >= 0 {
			got = Events[ix].Name
		}
		if got != r.event {
			t.Errorf("recorded.txt:%d: %q matched %s, want %s", r.line, r.msg, got, r.event)
			continue
		}
		if ix >= 0 && subjectString(subj) != r.subject {
			t.Errorf("recorded.txt:%d: subject %s, want %s", r.line, subjectString(subj), r.subject)
		}
	}
}

// TestEveryEventRecorded: no row of the table without a recorded real
// message that matches it, and no two rows with one name.
func TestEveryEventRecorded(t *testing.T) {
	have := map[string]bool{}
	for _, r := range loadRecorded(t) {
		have[r.event] = true
	}
	seen := map[string]bool{}
	for _, e := range Events {
		if seen[e.Name] {
			t.Errorf("event %s twice", e.Name)
		}
		seen[e.Name] = true
		if !have[e.Name] {
			t.Errorf("event %s has no recorded message in testdata/recorded.txt", e.Name)
		}
		if e.Meaning == "" || e.Remedy == "" {
			t.Errorf("event %s: meaning and remedy are required", e.Name)
		}
		switch e.Severity {
		case Fatal, Warning, Info:
		default:
			t.Errorf("event %s: severity %q", e.Name, e.Severity)
		}
	}
}

func TestBadTables(t *testing.T) {
	for _, evs := range [][]Event{
		{{Name: "x", Drivers: []string{"mlx5_core"}}},
		{{Name: "x", Needle: "a", Drivers: []string{"mlx5_core"}, Pattern: "("}},
		{{Name: "x", Needle: "a"}},
	} {
		if _, err := NewMatcher(evs); err == nil {
			t.Errorf("NewMatcher(%+v) accepted", evs)
		}
	}
}

func TestDictSubject(t *testing.T) {
	s := dictSubject(Subject{Netdev: "eth1"}, []byte("+pci:0000:13:00.1"))
	if s.PCI != "0000:13:00.1" || s.Netdev != "eth1" {
		t.Errorf("dict pci: %+v", s)
	}
	if s := dictSubject(Subject{}, []byte("+infiniband:mlx5_0")); s.IBDev != "mlx5_0" {
		t.Errorf("dict infiniband: %+v", s)
	}
	if s := dictSubject(Subject{}, []byte("+pci:garbage")); s != (Subject{}) {
		t.Errorf("dict garbage: %+v", s)
	}
	if s := dictSubject(Subject{}, []byte("n3")); s != (Subject{}) {
		t.Errorf("dict netdev index: %+v", s)
	}
}

func TestInfinibandPrefix(t *testing.T) {
	// ibdev_printk's prefix ("infiniband mlx5_0: ...") names the RDMA
	// device; a row for it would use the driver word "infiniband".
	m, err := NewMatcher([]Event{{Name: "ib", Needle: "error", Drivers: []string{"infiniband"}, Meaning: "m", Remedy: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	ix, s := m.Match([]byte("infiniband mlx5_3: some error"))
	if ix != 0 || s.IBDev != "mlx5_3" {
		t.Errorf("got %d %+v", ix, s)
	}
}
