// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package remediate turns the diagnose findings that have a safe fix into
// changes an operator plans, applies and rolls back. Every change goes
// through a Writer below --path.rootfs, and its undo data is journaled
// before the change is made. Command is `rdma_doctor remediate`: what it
// prints, asks and exits with.
package remediate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"syscall"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
)

// Input is what an action plans from: the same reading diagnose judges,
// the config's policies, and the writer (to read the action's own drop-in
// files, which no reader of host state parses).
type Input struct {
	Snap   *diagnose.Reading
	Config *config.Config
	W      Writer
	// Counters is the running kernel's optional counters (the same the
	// writer's AreaRDMA reaches); nil on a tree that is not the running
	// kernel's.
	Counters Counters
}

// Action fixes what one diagnose check finds.
type Action interface {
	// ID is the id diagnose names in Finding.Action.
	ID() string
	// Checks are the diagnose check ids the action answers.
	Checks() []string
	// Plan compares the host with the desired state. No change and a
	// non-empty note: nothing to do, and why.
	Plan(in *Input) (changes []Change, notes []string, err error)
}

// Change is one file write: an attribute of sysfs/procfs written in place,
// or a drop-in file of the action's own replaced atomically.
type Change struct {
	Action string `json:"action"`
	Check  string `json:"check"`
	// Target is what the change is about, in words (cpu3, irq 181, a sysctl).
	Target string `json:"target"`
	Area   Area   `json:"area"`
	Path   string `json:"path"`
	// Current is the present content ("" and Exists false when absent).
	Current string `json:"current"`
	Exists  bool   `json:"exists"`
	Desired string `json:"desired"`
	// InPlace writes an existing kernel attribute; otherwise the file is
	// a drop-in written atomically (parents created as needed).
	InPlace bool `json:"in_place"`
	// Key, on an in-place change, makes it a record write: the attribute
	// takes one line per write and keeps the others (rdma.max, keyed by
	// device). Current and Desired are then that line.
	Key string `json:"key,omitempty"`
}

// Manual is a step remediate never takes, with the reason.
type Manual struct {
	Topic  string `json:"topic"`
	Step   string `json:"step"`
	Reason string `json:"reason"`
}

// ActionPlan is one action's part of a plan.
type ActionPlan struct {
	Action  string   `json:"action"`
	Checks  []string `json:"checks"`
	Changes []Change `json:"changes"`
	// Notes say why there is nothing to do, or what the operator must
	// also do (irqbalance).
	Notes []string `json:"notes,omitempty"`
	Error string   `json:"error,omitempty"`
}

// Plan is the whole plan.
type Plan struct {
	Version int          `json:"version"`
	Actions []ActionPlan `json:"actions"`
	Manual  []Manual     `json:"manual"`
}

// Changes lists every change of the plan in order.
func (p *Plan) Changes() []Change {
	var out []Change
	for _, a := range p.Actions {
		out = append(out, a.Changes...)
	}
	return out
}

// Refusals are what remediate never does (DESIGN.md, Remediate).
var Refusals = []Manual{
	{"selinux", "leave SELinux enforcing; if it blocks RDMA, write a policy module (audit2allow) and review it", "a security policy is the site's decision, never a tuning step"},
	{"firewall", "open what the fabric needs (e.g. IPoIB TCP ports, rdma_cm) in the site's firewall rules", "disabling or editing a firewall changes the host's exposure"},
	{"firmware", "flash HCA firmware with mlxfwmanager/mstflint during a maintenance window", "a failed flash can brick the adapter; needs a reset to take effect"},
	{"drivers", "install or upgrade MLNX_OFED/DOCA or the distribution's rdma-core with the package manager", "driver changes need reboots and validation"},
	{"subnet-manager", "change the subnet manager (opensm priority, partitions) on the SM node", "the SM serves the whole fabric, not this host"},
	{"reboot", "reboot when a persistent setting (kernel command line, BIOS power profile, firmware) needs it", "remediate never reboots; runtime changes take effect at once"},
}

// Actions is every action, in plan order.
func Actions() []Action {
	return []Action{sysctlAction{}, governorAction{}, irqAction{}, memlockAction{}, hugepagesAction{}, rdmaCgroupAction{}, ipoibAction{}, ipv6Action{}, optionalCountersAction{}}
}

// Select returns the actions named in only (all when empty); an unknown
// id is an error listing the known ones.
func Select(only []string) ([]Action, error) {
	all := Actions()
	if len(only) == 0 {
		return all, nil
	}
	byID := map[string]Action{}
	var ids []string
	for _, a := range all {
		byID[a.ID()] = a
		ids = append(ids, a.ID())
	}
	var out []Action
	seen := map[string]bool{}
	for _, id := range only {
		a, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("unknown remediate action %q (known: %s)", id, strings.Join(ids, ", "))
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, a)
		}
	}
	return out, nil
}

// MakePlan plans every action. An action that cannot plan reports its
// error in its part; the others still plan.
func MakePlan(in *Input, actions []Action) *Plan {
	p := &Plan{Version: 1, Manual: Refusals}
	for _, a := range actions {
		ap := ActionPlan{Action: a.ID(), Checks: a.Checks()}
		ch, notes, err := a.Plan(in)
		if err != nil {
			ap.Error = err.Error()
		}
		ap.Changes, ap.Notes = ch, notes
		if ap.Changes == nil {
			ap.Changes = []Change{}
		}
		p.Actions = append(p.Actions, ap)
	}
	return p
}

// Result is what an apply did.
type Result struct {
	Applied    []Change
	NotApplied []Change
	// Untouched is set when the run stopped before its first change (the
	// lock was held, the journal was refused): there is nothing to roll
	// back.
	Untouched bool
}

// Apply makes the changes in order, journaling each path's undo data
// before its first change. It holds the journal's lock for the whole run:
// another apply or rollback running on the tree is a *LockedError and
// nothing is changed. It stops at the first failure: the error names the
// change, and Result says what was and was not applied.
func Apply(w Writer, changes []Change) (r Result, err error) {
	release, err := w.Lock()
	if err != nil {
		r.NotApplied, r.Untouched = changes, true
		return r, err
	}
	defer func() {
		if rerr := release(); err == nil {
			err = rerr
		}
	}()
	j, err := LoadJournal(w)
	if errors.Is(err, ErrNoJournal) {
		j, err = &Journal{}, nil
	}
	if err != nil {
		r.NotApplied, r.Untouched = changes, true
		return r, err
	}
	for i, c := range changes {
		if err := applyOne(w, j, c); err != nil {
			r.NotApplied = changes[i:]
			return r, fmt.Errorf("%s %s (%s:%s): %w", c.Action, c.Target, c.Area, c.Path, err)
		}
		r.Applied = append(r.Applied, c)
	}
	return r, nil
}

func applyOne(w Writer, j *Journal, c Change) error {
	exists, err := w.Exists(c.Area, c.Path)
	if err != nil {
		return err
	}
	if c.InPlace && !exists {
		return fmt.Errorf("the target vanished since the plan: %w", fs.ErrNotExist)
	}
	if c.Key != "" {
		return applyRecord(w, j, c)
	}
	var old []byte
	// mode is what the drop-in is written with, was the mode journaled
	// to restore: both from Lstat of the path itself, never a link's.
	mode, was := DropInMode, fs.FileMode(0)
	if exists {
		if !c.InPlace {
			if was, err = dropInMode(w, c); err != nil {
				return err
			}
			mode = was.Perm() &^ 0o022
		}
		if old, err = w.ReadFile(c.Area, c.Path); err != nil {
			return err
		}
		if bytes.Equal(old, []byte(c.Desired)) {
			return nil
		}
	}
	if !c.InPlace {
		// Parents of a drop-in, outermost first, journaled before each
		// is created so rollback removes them.
		var missing []string
		for d := path.Dir(c.Path); d != "." && d != "/"; d = path.Dir(d) {
			ok, err := w.Exists(c.Area, d)
			if err != nil {
				return err
			}
			if ok {
				break
			}
			missing = append(missing, d)
		}
		sort.Slice(missing, func(a, b int) bool { return len(missing[a]) < len(missing[b]) })
		for _, d := range missing {
			if !j.has(c.Area, d, "") {
				j.Entries = append(j.Entries, Entry{Action: c.Action, Area: c.Area, Path: d, Kind: "dir"})
				if err := j.save(w); err != nil {
					return err
				}
			}
			if err := w.Mkdir(c.Area, d); err != nil {
				return err
			}
		}
	}
	if !j.has(c.Area, c.Path, "") {
		j.Entries = append(j.Entries, Entry{Action: c.Action, Area: c.Area, Path: c.Path, Kind: "file", Existed: exists, Old: old, Mode: was})
		if err := j.save(w); err != nil {
			return err
		}
	}
	if c.InPlace {
		return w.WriteInPlace(c.Area, c.Path, []byte(c.Desired))
	}
	return w.WriteAtomic(c.Area, c.Path, []byte(c.Desired), mode)
}

// DropInMode is the mode of a drop-in remediate creates.
const DropInMode fs.FileMode = 0o644

// dropInMode is the restorable mode of an existing drop-in. A symbolic
// link there is refused: writing through it would change the file it
// points to (with the link's 0777 taken for its mode), and replacing it
// would undo what whoever made it meant; the operator decides.
func dropInMode(w Writer, c Change) (fs.FileMode, error) {
	fi, err := w.Lstat(c.Area, c.Path)
	if err != nil {
		return 0, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return 0, fmt.Errorf("the drop-in %w", ErrSymlink)
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("the drop-in %w (%v)", ErrNotRegular, fi.Mode().Type())
	}
	return fi.Mode() & restorableMode, nil
}

// applyRecord writes one record of a keyed kernel attribute, journaling
// the record's former line first.
func applyRecord(w Writer, j *Journal, c Change) error {
	if !c.InPlace || c.Area == AreaRoot {
		return fmt.Errorf("a record write (key %s) must be an in-place kernel attribute", c.Key)
	}
	b, err := w.ReadFile(c.Area, c.Path)
	if err != nil {
		return err
	}
	old, ok := RecordLine(string(b), c.Key)
	if !ok {
		return fmt.Errorf("no line for %s any more (gone since the plan): %w", c.Key, ErrNoRecord)
	}
	if strings.TrimSpace(old) == strings.TrimSpace(c.Desired) {
		return nil
	}
	if !j.has(c.Area, c.Path, c.Key) {
		j.Entries = append(j.Entries, Entry{Action: c.Action, Area: c.Area, Path: c.Path, Kind: "record", Key: c.Key, Existed: true, Old: []byte(old + "\n")})
		if err := j.save(w); err != nil {
			return err
		}
	}
	return w.WriteRecord(c.Area, c.Path, c.Key, []byte(c.Desired))
}

// RollbackOptions change how Rollback treats a damaged journal.
type RollbackOptions struct {
	// Force restores the entries that can be read whole from a damaged
	// journal (empty, cut short, data after its end, no entries) and
	// removes it. Another version or an invalid entry is still refused.
	Force bool
	// Log, when set, gets one line about what Force dropped.
	Log io.Writer
}

// Rollback is RollbackWith without options: a damaged journal is refused.
func Rollback(w Writer) ([]Entry, error) {
	return RollbackWith(w, RollbackOptions{})
}

// RollbackWith restores every journaled path, newest first: the old
// content written back, files, temp files and directories the apply
// created removed. Then it removes the journal. It holds the journal's
// lock for the whole run. A kernel attribute (or record) that no longer
// exists took its setting with it: its entry comes back with Gone set and
// the rest goes on. It is idempotent: run again after an interrupted
// rollback it restores the same values; with no journal it returns
// ErrNoJournal and changes nothing but the state an apply killed before
// its first journal left.
func RollbackWith(w Writer, o RollbackOptions) (restored []Entry, err error) {
	// Without a state directory no apply left anything but what one
	// killed while making it left (removed here): nothing to lock (the
	// lock would create it, and fail on a read-only tree). A link on the
	// way is refused before anything is opened through it.
	ok, err := w.CleanState()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w at /%s", ErrNoJournal, JournalPath)
	}
	release, err := w.Lock()
	if err != nil {
		return nil, err
	}
	defer func() {
		if rerr := release(); err == nil {
			err = rerr
		}
	}()
	j, err := loadForRollback(w, o)
	if errors.Is(err, ErrNoJournal) {
		// An apply killed before its first journal left at most a temp
		// file of it; the empty state directories go with the lock.
		if rerr := removeJournal(w); rerr != nil {
			return nil, fmt.Errorf("remove journal temp file: %w", rerr)
		}
	}
	if err != nil {
		return nil, err
	}
	for i := len(j.Entries) - 1; i >= 0; i-- {
		e := j.Entries[i]
		out, err := restore(w, e)
		if err != nil {
			return restored, fmt.Errorf("restore %s:%s (action %s): %w; the journal is kept, run rollback again", e.Area, e.Path, e.Action, err)
		}
		if out == kept {
			continue
		}
		e.Gone = out == gone
		restored = append(restored, e)
	}
	if err := removeJournal(w); err != nil {
		return restored, fmt.Errorf("remove journal: %w", err)
	}
	return restored, nil
}

// loadForRollback is LoadJournal, or with Force what can be salvaged
// from a damaged journal.
func loadForRollback(w Writer, o RollbackOptions) (*Journal, error) {
	j, err := LoadJournal(w)
	if !o.Force || !errors.Is(err, ErrJournalDamaged) {
		return j, err
	}
	b, rerr := readJournal(w)
	if rerr != nil {
		return nil, rerr
	}
	j, read, serr := salvageJournal(b)
	if serr != nil {
		return nil, serr
	}
	if err := checkTree(w, j); err != nil {
		return nil, err
	}
	if o.Log != nil {
		what := err.Error()
		if de := (*DamagedError)(nil); errors.As(err, &de) {
			what = "journal /" + JournalPath + " " + de.What
		}
		fmt.Fprintf(o.Log, "remediate rollback --force: %s; restoring the %d entries read whole (bytes 0-%d of %d), then removing it\n",
			what, len(j.Entries), read, len(b))
	}
	return j, nil
}

// outcome is what restore did with one entry.
type outcome int

const (
	restoredIt outcome = iota
	gone               // a kernel attribute (or record) that no longer exists: nothing to restore
	kept               // a directory the apply made that holds someone else's file now
)

// restore undoes one entry.
func restore(w Writer, e Entry) (outcome, error) {
	if e.Area == AreaRoot && e.Kind == "file" {
		// Temp files a killed apply (or rollback) left beside it.
		if err := w.RemoveTemps(e.Area, e.Path); err != nil {
			return restoredIt, err
		}
	}
	var err error
	switch {
	case e.Kind == "dir":
		err = w.Remove(e.Area, e.Path)
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			return kept, nil // theirs now too, and stays
		}
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		return restoredIt, err
	case !e.Existed:
		err = w.Remove(e.Area, e.Path)
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		return restoredIt, err
	case e.Area == AreaRoot:
		return restoredIt, w.WriteAtomic(e.Area, e.Path, e.Old, e.Mode)
	case e.Kind == "record":
		err = w.WriteRecord(e.Area, e.Path, e.Key, e.Old)
	default:
		err = w.WriteInPlace(e.Area, e.Path, e.Old)
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrNoRecord) || errors.Is(err, syscall.ENODEV) {
		return gone, nil
	}
	return restoredIt, err
}
