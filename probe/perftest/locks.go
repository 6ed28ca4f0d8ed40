// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package perftest

import (
	"context"
	"sort"
	"sync"
)

// DeviceLocks allows one probe at a time per RDMA device. A second run on
// a busy device would measure the first one, not the link. The scheduler
// and the responder of one process share Locks, so a peer's request cannot
// land in the middle of a local probe.
type DeviceLocks struct {
	mu   sync.Mutex
	held map[string]chan struct{}
}

// Locks is the process-wide set.
var Locks = &DeviceLocks{}

// anyDevice stands for "perftest picks the first device": it conflicts
// with every named device, since it may be any of them.
const anyDevice = ""

// Acquire waits until every device in names is free, then holds them all.
// It returns the function that releases them, or an error of kind Busy when
// ctx ends first.
func (l *DeviceLocks) Acquire(ctx context.Context, names ...string) (release func(), err error) {
	names = dedupe(names)
	for {
		l.mu.Lock()
		if l.held == nil {
			l.held = map[string]chan struct{}{}
		}
		wait := l.conflict(names)
		if wait == nil {
			done := make(chan struct{})
			for _, n := range names {
				l.held[n] = done
			}
			l.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					l.mu.Lock()
					for _, n := range names {
						delete(l.held, n)
					}
					l.mu.Unlock()
					close(done)
				})
			}, nil
		}
		l.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, &Error{Kind: Busy, Detail: "device busy with another probe: " + ctx.Err().Error(), Status: -1}
		}
	}
}

// conflict returns the channel of a lock that blocks names, or nil.
func (l *DeviceLocks) conflict(names []string) chan struct{} {
	for _, n := range names {
		if n == anyDevice {
			for _, c := range l.held {
				return c
			}
		}
		if c, ok := l.held[n]; ok {
			return c
		}
		if c, ok := l.held[anyDevice]; ok {
			return c
		}
	}
	return nil
}

func dedupe(names []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
