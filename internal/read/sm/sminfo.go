// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package sm asks the subnet manager how it is: it parses sminfo
// (infiniband-diags), finds the local ports sminfo can query, and runs it in
// the background on its own interval, keeping the latest answer per port
// and noticing an SM whose activity count has stopped rising.
package sm

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// State is SMInfo:SMState (IBA 14.2.5.13).
type State int

// SM states as sminfo prints them (state N SMINFO_*).
const (
	StateNotActive   State = 0
	StateDiscovering State = 1
	StateStandby     State = 2
	StateMaster      State = 3
)

var stateNames = [...]string{"NOTACTIVE", "DISCOVERING", "STANDBY", "MASTER"}

// sminfoNames are the words sminfo prints after the number (sminfo.c).
var sminfoNames = [...]string{"SMINFO_NOTACT", "SMINFO_DISCOVER", "SMINFO_STANDBY", "SMINFO_MASTER"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "UNKNOWN"
}

// Info is one sminfo answer: the SM that the queried LID (by default the
// SM LID the local port knows) belongs to.
type Info struct {
	LID  int
	GUID string // "0x%016x", as ibstat prints GUIDs
	// ActivityCount is SMInfo:ActCount. A master SM increments it while it
	// works; standby SMs watch it to decide whether the master is alive.
	ActivityCount uint64
	Priority      int
	State         State
}

const linePrefix = "sminfo: sm lid "

// ParseSMInfo parses sminfo's standard output, one line:
//
//	sminfo: sm lid 4 sm guid 0x100001, activity count 409 priority 14 state 3 SMINFO_MASTER
//
// (sminfo.c: "sminfo: sm lid %d sm guid 0x%" PRIx64 ", activity count %u
// priority %d state %d %s"). Other lines are ignored; the first line that
// starts like the answer must parse completely.
func ParseSMInfo(out []byte) (Info, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, linePrefix) {
			return parseLine(line)
		}
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return Info{}, fmt.Errorf("sminfo printed nothing")
	}
	return Info{}, fmt.Errorf("no %q line in sminfo output", strings.TrimSpace(linePrefix))
}

func parseLine(line string) (Info, error) {
	bad := func(what string) (Info, error) {
		return Info{}, fmt.Errorf("sminfo line %q: %s", clip(line), what)
	}
	f := strings.Fields(strings.TrimPrefix(line, "sminfo:"))
	// sm lid N sm guid G, activity count N priority N state N NAME
	if len(f) < 13 || f[0] != "sm" || f[1] != "lid" || f[3] != "sm" || f[4] != "guid" ||
		f[6] != "activity" || f[7] != "count" || f[9] != "priority" || f[11] != "state" {
		return bad("not in sminfo's format")
	}
	var info Info
	lid, err := strconv.ParseUint(f[2], 10, 16)
	if err != nil {
		return bad("bad lid")
	}
	info.LID = int(lid)
	g, ok := strings.CutSuffix(f[5], ",")
	if !ok {
		return bad("bad guid")
	}
	h, ok := strings.CutPrefix(g, "0x")
	if !ok || h == "" {
		return bad("bad guid")
	}
	gv, err := strconv.ParseUint(h, 16, 64)
	if err != nil {
		return bad("bad guid")
	}
	info.GUID = fmt.Sprintf("0x%016x", gv)
	if info.ActivityCount, err = strconv.ParseUint(f[8], 10, 32); err != nil {
		return bad("bad activity count")
	}
	prio, err := strconv.Atoi(f[10])
	if err != nil || prio < 0 || prio > 15 {
		return bad("bad priority")
	}
	info.Priority = prio
	st, err := strconv.Atoi(f[12])
	if err != nil || st < 0 || st > 3 {
		return bad("bad state")
	}
	info.State = State(st)
	if len(f) > 13 && f[13] != sminfoNames[st] {
		return bad("state name does not match its number")
	}
	return info, nil
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
