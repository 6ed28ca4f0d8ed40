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
	m, err := NewMatcher(Events, Rules)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range loadRecorded(t) {
		ix, subj := m.Match([]byte(r.msg))
		got := "-"
		if ix >= 0 {
			got = Events[m.Event(ix)].Name
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

// TestEveryRuleRecorded: no rule without a recorded real message that
// it matches, no event without a rule, no two events with one name, and
// no family remedy that names another vendor's tool.
func TestEveryRuleRecorded(t *testing.T) {
	m, err := NewMatcher(Events, Rules)
	if err != nil {
		t.Fatal(err)
	}
	matched := map[int]bool{}
	for _, r := range loadRecorded(t) {
		if ix, _ := m.Match([]byte(r.msg)); ix >= 0 {
			matched[m.Rule(ix)] = true
		}
	}
	ruled := map[string]bool{}
	for i, r := range Rules {
		ruled[r.Event] = true
		if !matched[i] {
			t.Errorf("rule %d (%s, %s, %v) has no recorded message in testdata/recorded.txt", i, r.Event, r.Family, r.Drivers)
		}
	}
	seen := map[string]bool{}
	for _, e := range Events {
		if seen[e.Name] {
			t.Errorf("event %s twice", e.Name)
		}
		seen[e.Name] = true
		if !ruled[e.Name] {
			t.Errorf("event %s has no rule", e.Name)
		}
		if e.Meaning == "" || e.Remedy == "" {
			t.Errorf("event %s: meaning and remedy are required", e.Name)
		}
		switch e.Severity {
		case Fatal, Warning, Info:
		default:
			t.Errorf("event %s: severity %q", e.Name, e.Severity)
		}
		// The vendor-neutral remedy and every family's own name only
		// tools that work on the devices they are for.
		for f, r := range map[Family]string{"": e.Remedy, FamilyBNXT: e.Remedies[FamilyBNXT],
			FamilyIntel: e.Remedies[FamilyIntel], FamilyHNS: e.Remedies[FamilyHNS], FamilyCXGB4: e.Remedies[FamilyCXGB4], FamilyEFA: e.Remedies[FamilyEFA]} {
			for _, tool := range []string{"mlxfwreset", "mlxlink", "mlxconfig", "mlxfwmanager", "flint"} {
				if strings.Contains(r, tool) {
					t.Errorf("event %s, family %q: remedy names %s, an NVIDIA/Mellanox tool", e.Name, f, tool)
				}
			}
		}
	}
}

// TestRemedyFor: a family's own remedy where it has one, the neutral one
// otherwise.
func TestRemedyFor(t *testing.T) {
	ev := Events[EventIndex("cmd_timeout")]
	if r := RemedyFor(ev, FamilyMLX5); !strings.Contains(r, "mlxfwreset") {
		t.Errorf("mlx5: %s", r)
	}
	if r := RemedyFor(ev, FamilyBNXT); !strings.Contains(r, "bnxt_re") || strings.Contains(r, "mlx") {
		t.Errorf("bnxt: %s", r)
	}
	if r := RemedyFor(ev, FamilyCXGB4); r != ev.Remedy {
		t.Errorf("cxgb4: %s", r)
	}
}

func TestBadTables(t *testing.T) {
	evs := []Event{{Name: "x", Meaning: "m", Remedy: "r"}}
	for _, c := range []struct {
		events []Event
		rules  []Rule
	}{
		{evs, []Rule{{Event: "x", Family: "f", Drivers: []string{"mlx5_core"}}}},
		{evs, []Rule{{Event: "x", Family: "f", Needle: "a", Drivers: []string{"mlx5_core"}, Pattern: "("}}},
		{evs, []Rule{{Event: "x", Family: "f", Needle: "a"}}},
		{evs, []Rule{{Event: "y", Family: "f", Needle: "a", Drivers: []string{"d"}}}},
		{evs, []Rule{{Event: "x", Needle: "a", Drivers: []string{"no_such_driver"}}}},
		{append(evs, evs[0]), nil},
	} {
		if _, err := NewMatcher(c.events, c.rules); err == nil {
			t.Errorf("NewMatcher(%+v, %+v) accepted", c.events, c.rules)
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
	m, err := NewMatcher([]Event{{Name: "ib", Meaning: "m", Remedy: "r"}},
		[]Rule{{Event: "ib", Family: "f", Needle: "error", Drivers: []string{"infiniband"}}})
	if err != nil {
		t.Fatal(err)
	}
	ix, s := m.Match([]byte("infiniband mlx5_3: some error"))
	if ix != 0 || s.IBDev != "mlx5_3" {
		t.Errorf("got %d %+v", ix, s)
	}
}

// TestCommandInterfaceSeverity: mlx5's command interface trouble that the
// driver recovers from (a late completion found on the command EQ, no
// free command slot) is a warning on its device; a command that never
// completed stays fatal.
func TestCommandInterfaceSeverity(t *testing.T) {
	m, err := NewMatcher(Events, Rules)
	if err != nil {
		t.Fatal(err)
	}
	for msg, want := range map[string]Severity{
		"mlx5_core 0000:00:02.0: mlx5_cmd_eq_recover:247:(pid 3122): Recovered 1 EQEs on cmd_eq":                                  Warning,
		"mlx5_core 0000:00:02.0: wait_func_handle_exec_timeout:1113:(pid 3122): cmd[0]: CREATE_CQ(0x400) recovered after timeout": Warning,
		"mlx5_core 0000:21:00.0: cmd_work_handler:930:(pid 8): failed to allocate command entry":                                  Warning,
		"mlx5_core 0000:61:00.0: wait_func:1132:(pid 141181): CREATE_DCT(0x710) timeout. Will cause a leak of a command resource": Fatal,
	} {
		ix, s := m.Match([]byte(msg))
		if ix < 0 {
			t.Errorf("%q matched nothing", msg)
			continue
		}
		ev := Events[m.Event(ix)]
		if ev.Severity != want || m.Family(ix) != FamilyMLX5 || s.PCI == "" {
			t.Errorf("%q: %s (%s), family %s, subject %+v; want %s on its PCI function", msg, ev.Name, ev.Severity, m.Family(ix), s, want)
		}
	}
}
