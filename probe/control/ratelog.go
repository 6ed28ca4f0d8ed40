// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package control

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// rateLog logs events that a peer can cause as often as it likes: the
// first one in full, then at most one line per interval with the number
// of those since, so a flood of connections costs a line a minute, not a
// line each.
type rateLog struct {
	logger       *slog.Logger
	level        slog.Level
	msg, summary string
	every        time.Duration

	mu sync.Mutex
	// window is armed while events are only counted; it fires flush.
	window *time.Timer
	count  int
}

// log records one event with its attributes: logged when no window is
// open, else counted.
func (l *rateLog) log(args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.window != nil {
		l.count++
		return
	}
	l.logger.Log(context.Background(), l.level, l.msg, args...)
	l.window = time.AfterFunc(l.every, l.flush)
}

// flush ends a window: it logs the count of events in it, if any, and
// then keeps counting for another interval; after a quiet interval the
// next event is logged in full again.
func (l *rateLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.count == 0 {
		l.window = nil
		return
	}
	l.logSummary()
	l.window = time.AfterFunc(l.every, l.flush)
}

// stop logs what is still counted and closes the window.
func (l *rateLog) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.window != nil {
		l.window.Stop()
		l.window = nil
	}
	if l.count > 0 {
		l.logSummary()
	}
}

func (l *rateLog) logSummary() {
	l.logger.Log(context.Background(), l.level, l.summary, "count", l.count, "in_last", l.every.String())
	l.count = 0
}
