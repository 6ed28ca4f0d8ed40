// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
)

// JournalVersion is the format of the journal file this version writes.
// Version 2 added record entries (one line of a keyed kernel attribute);
// a version 1 journal has none and is read as it is. Version 3 added the
// tree it belongs to (Root), which it must have; versions 1 and 2 have
// none and are read without the check. A journal of any other version is
// refused: its undo data might be read wrongly.
const JournalVersion = 3

// StateDir and JournalPath are below --path.rootfs.
const (
	StateDir    = "var/lib/rdma_doctor"
	JournalPath = StateDir + "/remediate-journal.json"
)

// ErrNoJournal is returned by LoadJournal and Rollback when there is
// nothing to roll back.
var ErrNoJournal = errors.New("no remediate journal")

// Journal is the undo data of every change applied since the last
// rollback, in the order they were made.
type Journal struct {
	Version int `json:"version"`
	// Root is the tree the journal was written for; rollback and apply
	// refuse it on another (ErrOtherTree).
	Root    *TreeID `json:"root,omitempty"`
	Entries []Entry `json:"entries"`
	// Complete is the end marker: a journal without it was cut short.
	Complete bool `json:"complete"`
}

// Entry is the state of one path before the first change to it.
type Entry struct {
	Action string `json:"action"`
	Area   Area   `json:"area"`
	Path   string `json:"path"`
	// Kind is "file", "dir" (a directory the apply created) or "record"
	// (the line of Key in a keyed kernel attribute such as rdma.max).
	Kind    string `json:"kind"`
	Key     string `json:"key,omitempty"`
	Existed bool   `json:"existed"`
	// Old is the file's exact former content, or the record's former
	// line (base64 in JSON).
	Old  []byte      `json:"old,omitempty"`
	Mode fs.FileMode `json:"mode,omitempty"`
	// Gone is set by Rollback on a kernel attribute (or record) that no
	// longer exists: the IRQ, netdev or device went, and its setting with
	// it, so there is nothing to restore.
	Gone bool `json:"-"`
}

func (j *Journal) has(a Area, path, key string) bool {
	for _, e := range j.Entries {
		if e.Area == a && e.Path == path && e.Key == key {
			return true
		}
	}
	return false
}

// ErrJournalDamaged is the error of a journal that is empty, cut short,
// has data after its end or holds no entry (an apply never writes one
// without): neither apply nor rollback trusts it, and rollback --force
// restores the entries that can be read whole and removes it.
var ErrJournalDamaged = errors.New("damaged remediate journal")

// DamagedError says how the journal is damaged.
type DamagedError struct{ What string }

func (e *DamagedError) Error() string {
	return fmt.Sprintf("journal /%s %s: the host was not changed by this run; "+
		"`rdma_doctor remediate rollback --force` restores the entries that can be read whole and removes it", JournalPath, e.What)
}

// Unwrap makes errors.Is(err, ErrJournalDamaged) hold.
func (e *DamagedError) Unwrap() error { return ErrJournalDamaged }

func damaged(format string, args ...any) error {
	return &DamagedError{What: fmt.Sprintf(format, args...)}
}

// LoadJournal reads the journal; ErrNoJournal when there is none. A
// damaged journal is a *DamagedError, one of another version or with an
// invalid entry another error, one of another tree ErrOtherTree, each
// naming the file.
func LoadJournal(w Writer) (*Journal, error) {
	b, err := readJournal(w)
	if err != nil {
		return nil, err
	}
	j, err := parseJournal(b)
	if err != nil {
		return nil, err
	}
	if err := checkTree(w, j); err != nil {
		return nil, err
	}
	return j, nil
}

func readJournal(w Writer) ([]byte, error) {
	b, err := w.ReadFile(AreaRoot, JournalPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w at /%s", ErrNoJournal, JournalPath)
	}
	if err != nil {
		return nil, fmt.Errorf("read journal /%s: %w", JournalPath, err)
	}
	return b, nil
}

// parseJournal accepts only a journal exactly as save writes it.
func parseJournal(b []byte) (*Journal, error) {
	switch {
	case len(b) == 0:
		return nil, damaged("is empty (0 bytes)")
	case len(bytes.TrimSpace(b)) == 0:
		return nil, damaged("holds only white space (%d bytes)", len(b))
	}
	var j Journal
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, damaged("is truncated (%v)", err)
		}
		return nil, damaged("is corrupt (%v)", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, damaged("has data after its end (from byte %d)", dec.InputOffset())
	}
	if j.Version == 0 && len(j.Entries) == 0 && !j.Complete {
		// "{}" or "null": no version to refuse it by, nothing to restore.
		return nil, damaged("holds no version and no entries (an apply never writes such a journal: edited by hand?)")
	}
	if err := checkJournal(&j); err != nil {
		return nil, err
	}
	if !j.Complete {
		return nil, damaged("is truncated (no end marker)")
	}
	if len(j.Entries) == 0 {
		return nil, damaged("holds no entries (an apply never writes such a journal: edited by hand?)")
	}
	return &j, nil
}

// checkJournal refuses what no --force makes safe to restore: another
// version (its entries might mean something else) or an invalid entry.
func checkJournal(j *Journal) error {
	if j.Version < 1 || j.Version > JournalVersion {
		return fmt.Errorf("journal /%s has version %d, this rdma_doctor reads versions 1 to %d: roll back with the version that wrote it", JournalPath, j.Version, JournalVersion)
	}
	if (j.Version >= 3) != (j.Root != nil) {
		return fmt.Errorf("journal /%s: version %d with root %v: a version 3 journal names its tree, an older one cannot", JournalPath, j.Version, j.Root)
	}
	for i, e := range j.Entries {
		record := e.Kind == "record" && j.Version >= 2 && e.Key != "" && e.Area != AreaRoot && e.Existed
		if (e.Kind != "file" && e.Kind != "dir" && !record) || (e.Key != "" && !record) || e.Path == "" || strings.Contains(e.Path, "..") ||
			(e.Area != AreaRoot && e.Area != AreaSys && e.Area != AreaProc && e.Area != AreaRDMA) ||
			(e.Area == AreaRDMA && (e.Kind != "file" || !e.Existed)) || e.Mode&^restorableMode != 0 {
			return fmt.Errorf("journal /%s: entry %d is invalid (%s %s:%s)", JournalPath, i, e.Kind, e.Area, e.Path)
		}
	}
	return nil
}

// restorableMode are the mode bits a journal keeps of a file and restores.
const restorableMode = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// salvageJournal reads what --force restores from a damaged journal: the
// entries that decode whole from its start, in order. Reading stops at
// the first damage (a cut, garbage); what follows a complete journal is
// ignored. Another version or an invalid entry is still refused.
func salvageJournal(b []byte) (j *Journal, read int64, err error) {
	j = &Journal{}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	read = salvageObject(dec, j)
	if len(j.Entries) == 0 {
		return j, read, nil // nothing to restore, whatever the rest says
	}
	if err := checkJournal(j); err != nil {
		return nil, read, err
	}
	return j, read, nil
}

// salvageObject decodes the journal's fields into j until the first
// error, and returns the offset up to which it read cleanly.
func salvageObject(dec *json.Decoder, j *Journal) int64 {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			break
		}
		var ok bool
		switch key {
		case "version":
			ok = dec.Decode(&j.Version) == nil
		case "complete":
			ok = dec.Decode(&j.Complete) == nil
		case "root":
			ok = dec.Decode(&j.Root) == nil
		case "entries":
			ok = salvageEntries(dec, j)
		}
		if !ok {
			break
		}
	}
	return dec.InputOffset()
}

func salvageEntries(dec *json.Decoder, j *Journal) bool {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return false
	}
	for dec.More() {
		var e Entry
		if err := dec.Decode(&e); err != nil {
			return false
		}
		j.Entries = append(j.Entries, e)
	}
	_, err := dec.Token()
	return err == nil
}

// save writes the journal atomically. Its directory exists: the lock
// beside it is taken first.
func (j *Journal) save(w Writer) error {
	tree, err := w.Tree()
	if err != nil {
		return err
	}
	j.Version, j.Root, j.Complete = JournalVersion, &tree, true
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	if err := w.WriteAtomic(AreaRoot, JournalPath, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write journal /%s: %w", JournalPath, err)
	}
	return nil
}

// removeJournal removes the temp files of the journal a killed run left,
// and the journal; the state directories go with the lock.
func removeJournal(w Writer) error {
	if err := w.RemoveTemps(AreaRoot, JournalPath); err != nil {
		return err
	}
	if err := w.Remove(AreaRoot, JournalPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// checkTree refuses a journal written for another tree than w's.
func checkTree(w Writer, j *Journal) error {
	if j.Root == nil {
		return nil // version 1 or 2: written before journals named their tree
	}
	here, err := w.Tree()
	if err != nil {
		return err
	}
	if !j.Root.Same(here) {
		return fmt.Errorf("journal /%s belongs to %s (device %d, inode %d), not to this tree %s (device %d, inode %d): %w; "+
			"roll back on the tree it was written for", JournalPath, j.Root.Path, j.Root.Dev, j.Root.Ino, here.Path, here.Dev, here.Ino, ErrOtherTree)
	}
	return nil
}

// ErrOtherTree is the error of a journal written for another tree.
var ErrOtherTree = errors.New("journal of another tree")
