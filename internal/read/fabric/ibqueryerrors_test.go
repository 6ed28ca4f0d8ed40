// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func readIQE(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(iqeFixture(name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseIBQueryErrorsSX6036: a real fabric's ibqueryerrors (an SX6036
// switch and three ConnectX-3 hosts, linux-rdma 2021): CA headers without
// a GUID, the switch's "port ALL" sums and port 0 line, saturated 16-bit
// and 32-bit fields printed bare (fixed width), and the summary.
func TestParseIBQueryErrorsSX6036(t *testing.T) {
	lines := map[PortKey]*iqeLine{}
	all := 0
	sum, junk, err := parseIBQueryErrors(bytes.NewReader(readIQE(t, "sx6036-linux-rdma-2021-03-16.stdout")), func(l *iqeLine) {
		if l.all {
			all++
			return
		}
		lines[PortKey{l.guid, l.port}] = l
	})
	if err != nil || junk != 0 || !sum.seen || sum.nodes != 4 || sum.ports != 43 || sum.pmaFailures != 0 {
		t.Fatalf("err %v junk %d summary %+v", err, junk, sum)
	}
	if all != 1 || len(lines) != 14 {
		t.Errorf("%d ALL lines and %d port lines, want 1 and 14", all, len(lines))
	}
	p5 := lines[PortKey{0x2c903006e29b0, 5}]
	if p5 == nil || p5.values[SymbolErrors] != 65535 || p5.wide[SymbolErrors] || p5.values[TransmitDiscards] != 649 || p5.values[TransmitWait] != 84704351 || p5.malformed {
		t.Fatalf("SX6036 port 5: %+v", p5)
	}
	if v := (Value{V: p5.values[SymbolErrors], Bits: 16, Present: true}); !v.Saturated() {
		t.Error("65535 in 16 bits is not saturated")
	}
	if p1 := lines[PortKey{0x2c903006e29b0, 1}]; p1.values[TransmitWait] != 4294967295 || p1.seen[SymbolErrors] {
		t.Errorf("SX6036 port 1: %+v", p1)
	}
	if ca := lines[PortKey{0x7cfe900300179b32, 2}]; ca == nil || ca.values[TransmitWait] != 2 {
		t.Errorf("dl380g7 port 2: %+v", ca)
	}
}

// TestParseIBQueryErrorsWide: a value with a human-readable figure is a
// 64-bit one (the additional extended counters, and every data counter);
// the full PortCountersExtended prints eight fields.
func TestParseIBQueryErrorsWide(t *testing.T) {
	in := "Errors for 0x7cfe9003009ce5b0 \"sw\"\n   GUID 0x7cfe9003009ce5b0 port 1: [SymbolErrorCounter == 70000 (68.359K)] [PortXmitWait == 5 (5.000)]\n" +
		string(readIQE(t, "ibsim16-counters.stdout"))
	var got []*iqeLine
	sum, junk, err := parseIBQueryErrors(strings.NewReader(in), func(l *iqeLine) { got = append(got, l) })
	if err != nil || junk != 0 || !sum.seen {
		t.Fatalf("err %v junk %d summary %+v", err, junk, sum)
	}
	if l := got[0]; l.values[SymbolErrors] != 70000 || !l.wide[SymbolErrors] || !l.wide[TransmitWait] {
		t.Errorf("wide line: %+v", l)
	}
	if l := got[1]; l.fields != 8 || !l.seen[DataReceived] || !l.seen[PacketsTransmitted] || l.seen[SymbolErrors] {
		t.Errorf("data line: %+v", l)
	}
}

// TestParseIQEStderr: the recorded failures of a silent switch name its
// LID; ClassPortInfo's names the whole node.
func TestParseIQEStderr(t *testing.T) {
	fails, unattributed, other, _ := parseIQEStderr(readIQE(t, "ibsim16-errors-leaf004-silent.stderr"))
	if unattributed != 0 || other != "" || len(fails) != 9 {
		t.Fatalf("fails %+v unattributed %d other %q", fails, unattributed, other)
	}
	if f := fails[0]; f.lid != 6 || !f.node || f.port != 0 {
		t.Errorf("first failure %+v, want leaf004's ClassPortInfo (LID 6, whole node)", f)
	}
	if f := fails[3]; f.lid != 6 || f.node || f.port != 3 {
		t.Errorf("fourth failure %+v", f)
	}
	// A node description holding ", Lid " is read from the end.
	fails, _, _, _ = parseIQEStderr([]byte("ibwarn: [1] print_errors: IB_GSI_PORT_COUNTERS query failed on a, Lid 9 port 2 b, Lid 12 port 255\n"))
	if len(fails) != 1 || fails[0].lid != 12 || !fails[0].node {
		t.Errorf("%+v", fails)
	}
	if _, u, _, _ := parseIQEStderr([]byte("ibwarn: [1] x: classportinfo query failed on sw, somewhere\n")); u != 1 {
		t.Errorf("an unattributable failure was not counted")
	}
}

// TestParseIBQueryErrorsBounded: a line longer than ibqueryerrors ever
// prints is an error, not a growing buffer.
func TestParseIBQueryErrorsBounded(t *testing.T) {
	long := "   GUID 0x1 port 1:" + strings.Repeat(" [PortXmitData == 1 (1.000)]", 1000) + "\n"
	if _, _, err := parseIBQueryErrors(strings.NewReader(long), func(*iqeLine) {}); err == nil {
		t.Error("a 28 kB line was accepted")
	}
}

func FuzzParseIBQueryErrors(f *testing.F) {
	for _, n := range []string{"sx6036-linux-rdma-2021-03-16.stdout", "ibsim16-errors.stdout", "ibsim16-counters-leaf004-silent.stdout"} {
		f.Add(readIQE(f, n))
	}
	f.Add(readIQE(f, "ibsim16-errors-leaf004-silent.stderr"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = parseIBQueryErrors(bytes.NewReader(b), func(l *iqeLine) {
			if !l.all && (l.port < 0 || l.port > 255) {
				t.Fatalf("port %d", l.port)
			}
		})
		fails, _, _, _ := parseIQEStderr(b)
		for _, f := range fails {
			if f.lid <= 0 {
				t.Fatalf("failure with LID %d", f.lid)
			}
		}
	})
}

// TestZeroThresholds: an errors run is read only when every threshold its
// summary prints is 0 and every judged counter is printed (the list is the
// recorded ibsim run's, edited).
func TestZeroThresholds(t *testing.T) {
	var sum iqeSummary
	for l := range strings.SplitSeq(string(readIQE(t, "ibsim16-errors.stdout")), "\n") {
		if strings.HasPrefix(l, "## Thresholds:") {
			parseIQESummary([]byte(strings.TrimPrefix(l, "## ")), &sum)
		}
	}
	rec := sum.thresholds
	if err := zeroThresholds(rec); err != nil {
		t.Fatalf("recorded thresholds %q: %v", rec, err)
	}
	for _, bad := range []string{
		strings.Replace(rec, "[PortXmitWait = 0]", "[PortXmitWait = 100]", 1),
		strings.Replace(rec, "[VL15Dropped = 0]", "[VL15Dropped = 1]", 1),
		rec + "[SymbolErrorCounter = 10]", // a second line for a counter: the last one counts
		strings.Replace(rec, "[LinkDownedCounter = 0]", "", 1),
		strings.Replace(rec, "[PortRcvErrors = 0]", "[PortRcvErrors = 0", 1),
		strings.Replace(rec, "[PortRcvErrors = 0]", "[PortRcvErrors 0]", 1),
		"",
		"(null)", // what it prints when the file cannot be opened
	} {
		if err := zeroThresholds(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
