// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"container/list"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
)

// onceLogger logs each distinct error message once at warning level, then
// at debug level: a broken file fails on every scrape, and the log must
// stay readable. It remembers the max most recent messages (an LRU), so a
// host with more distinct errors than that still logs each new one once
// and memory stays bounded; suppressed counts the repeats sent to debug.
type onceLogger struct {
	logger     *slog.Logger
	max        int
	mu         sync.Mutex
	seen       map[string]*list.Element
	order      *list.List // of string, most recent first
	suppressed atomic.Uint64
}

func newOnceLogger(l *slog.Logger, max int) *onceLogger {
	return &onceLogger{logger: l, max: max, seen: map[string]*list.Element{}, order: list.New()}
}

// first records msg and reports whether it is new.
func (o *onceLogger) first(msg string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e, ok := o.seen[msg]; ok {
		o.order.MoveToFront(e)
		return false
	}
	o.seen[msg] = o.order.PushFront(msg)
	if o.order.Len() > o.max {
		oldest := o.order.Back()
		o.order.Remove(oldest)
		delete(o.seen, oldest.Value.(string))
	}
	return true
}

func (o *onceLogger) log(collector string, err error) {
	msg := err.Error()
	level := slog.LevelWarn
	if !o.first(msg) {
		level = slog.LevelDebug
		o.suppressed.Add(1)
	}
	hint := "the series that depend on it are left out of the scrape; logged once"
	if errors.Is(err, context.DeadlineExceeded) {
		hint = "raise --scrape.timeout or exclude slow devices with --collector.infiniband.device-exclude"
	}
	o.logger.Log(context.Background(), level, "collector error", "collector", collector, "err", msg, "hint", hint)
}
