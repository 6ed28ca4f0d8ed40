// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package opensm

import (
	"sync"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// LogReader reads OpenSM logs across refreshes: the first read of a log
// parses its last LogTail bytes, later ones only the lines added since:
// a busy SM's whole tail is too costly to parse at every refresh
// (docs/measurements.md#opensm). A rotated or
// truncated log, or one that grew by more than LogTail, is parsed afresh
// from its tail. Its zero value is ready; it is safe for concurrent use.
type LogReader struct {
	mu      sync.Mutex
	cursors map[string]*logCursor
}

type logCursor struct {
	at  hostfs.Growth // Data dropped: only where the next read starts
	log Log
}

// read returns what the log at path (rel below root) says so far.
func (r *LogReader) read(root hostfs.FS, path, rel string, now time.Time) (*Log, error) {
	r.mu.Lock()
	c := r.cursors[path]
	r.mu.Unlock()
	var prev hostfs.Growth
	if c != nil {
		prev = c.at
	}
	g, err := hostfs.ReadGrowth(root, rel, prev, LogTail)
	if err != nil {
		return nil, err
	}
	added := ParseLog(path, g.Data, now)
	var l Log
	if g.Fresh || c == nil {
		l = *added
	} else {
		l = c.log
		l.merge(added)
	}
	g.Data = nil
	r.mu.Lock()
	if r.cursors == nil {
		r.cursors = map[string]*logCursor{}
	}
	r.cursors[path] = &logCursor{at: g, log: l}
	r.mu.Unlock()
	out := l
	return &out, nil
}

// forget drops the cursors of logs not in keep: an opensm that stopped, or
// now logs elsewhere, must not hold memory.
func (r *LogReader) forget(keep []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for path := range r.cursors {
		found := false
		for _, k := range keep {
			found = found || k == path
		}
		if !found {
			delete(r.cursors, path)
		}
	}
}

// merge adds what the lines after l's say: counts add up, the last
// SUBNET UP, state and error are the newer ones where the new lines have
// them.
func (l *Log) merge(n *Log) {
	l.Lines += n.Lines
	l.Unparsed += n.Unparsed
	l.Errors += n.Errors
	if !n.SubnetUp.IsZero() {
		l.SubnetUp = n.SubnetUp
	}
	if n.State != "" {
		l.State, l.StateTime = n.State, n.StateTime
	}
	if n.LastError != "" {
		l.LastError, l.LastErrorTime = n.LastError, n.LastErrorTime
	}
}
