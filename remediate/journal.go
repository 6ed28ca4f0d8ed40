// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package remediate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// JournalVersion is the format of the journal file this version writes.
// Version 2 added record entries (one line of a keyed kernel attribute);
// a version 1 journal has none and is read as it is. A journal of any
// other version is refused: its undo data might be read wrongly.
const JournalVersion = 2

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
	Version int     `json:"version"`
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

// restorableMode are the mode bits a journal keeps of a file and restores.
const restorableMode = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

func (j *Journal) has(a Area, path, key string) bool {
	for _, e := range j.Entries {
		if e.Area == a && e.Path == path && e.Key == key {
			return true
		}
	}
	return false
}

// LoadJournal reads the journal; ErrNoJournal when there is none. A
// truncated or corrupt journal, or one of another version, is an error
// naming the file.
func LoadJournal(w Writer) (*Journal, error) {
	b, err := w.ReadFile(AreaRoot, JournalPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w at /%s", ErrNoJournal, JournalPath)
	}
	if err != nil {
		return nil, fmt.Errorf("read journal /%s: %w", JournalPath, err)
	}
	return parseJournal(b)
}

func parseJournal(b []byte) (*Journal, error) {
	var j Journal
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("journal /%s is truncated or corrupt (%v): the host was not changed by this run; restore it by hand from the file", JournalPath, err)
	}
	if j.Version != 1 && j.Version != JournalVersion {
		return nil, fmt.Errorf("journal /%s has version %d, this rdma_doctor reads versions 1 and %d: roll back with the version that wrote it", JournalPath, j.Version, JournalVersion)
	}
	if !j.Complete {
		return nil, fmt.Errorf("journal /%s is truncated (no end marker)", JournalPath)
	}
	for i, e := range j.Entries {
		record := e.Kind == "record" && j.Version >= 2 && e.Key != "" && e.Area != AreaRoot && e.Existed
		if (e.Kind != "file" && e.Kind != "dir" && !record) || (e.Key != "" && !record) || e.Path == "" || strings.Contains(e.Path, "..") ||
			(e.Area != AreaRoot && e.Area != AreaSys && e.Area != AreaProc) {
			return nil, fmt.Errorf("journal /%s: entry %d is invalid (%s %s:%s)", JournalPath, i, e.Kind, e.Area, e.Path)
		}
	}
	return &j, nil
}

// save writes the journal atomically. Its directory exists: the lock
// beside it is taken first.
func (j *Journal) save(w Writer) error {
	j.Version, j.Complete = JournalVersion, true
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	if err := w.WriteAtomic(AreaRoot, JournalPath, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write journal /%s: %w", JournalPath, err)
	}
	return nil
}

// removeJournal removes the journal and a temp file of it a killed run
// left; the state directories go with the lock (DirWriter.unlock).
func removeJournal(w Writer) error {
	for _, p := range []string{tempName(JournalPath), JournalPath} {
		if err := w.Remove(AreaRoot, p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}
