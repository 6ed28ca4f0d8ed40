// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// Records is a slog handler that keeps every record, so a test can count
// log lines.
type Records struct {
	mu   sync.Mutex
	recs []slog.Record
}

// Enabled implements slog.Handler: every level is kept.
func (h *Records) Enabled(context.Context, slog.Level) bool { return true }

// WithAttrs implements slog.Handler.
func (h *Records) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup implements slog.Handler.
func (h *Records) WithGroup(string) slog.Handler { return h }

// Handle implements slog.Handler.
func (h *Records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}

// Matching returns the records whose message contains substr.
func (h *Records) Matching(substr string) []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Record
	for _, r := range h.recs {
		if strings.Contains(r.Message, substr) {
			out = append(out, r)
		}
	}
	return out
}
