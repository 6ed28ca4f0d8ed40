// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"fmt"
	"strings"
)

// Need is one source as a consumer that judges its readings sees it (the
// diagnose checks' Reads gate): the name a report lists it by, and why a
// reading of it cannot be used. Each is declared beside its source's
// accessor, by the package that knows how the source fails (off, not the
// live kernel, not watched, unreadable), so a consumer mirrors no
// source's failure modes: it hands the Need the reading it got.
type Need[T any] struct {
	name string
	// why is the reason a reading (v, err) cannot be used, "" when it
	// can. A consumer that read nothing passes T's zero and no error.
	why func(v T, err error) string
}

// Name is the name a report lists the source by.
func (n *Need[T]) Name() string { return n.name }

// Unavailable is why the reading v, err cannot be used, or "".
func (n *Need[T]) Unavailable(v T, err error) string { return n.why(v, err) }

// errText is a reason's error: "not read" where a reading is missing
// without one.
func errText(err error) string {
	if err == nil {
		return "not read"
	}
	return err.Error()
}

// ErrorsText joins a reading's partial errors for a reason or a
// finding, at most three of them.
func ErrorsText(errs []error) string {
	var parts []string
	for i, e := range errs {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(errs)-3))
			break
		}
		parts = append(parts, e.Error())
	}
	if len(parts) == 0 {
		return "unknown error"
	}
	return strings.Join(parts, "; ")
}

// cannotRead is the reason of a source whose reading is nil when it could
// not be read: "cannot read <what>: <why>".
func cannotRead[T any](name, what string) *Need[*T] {
	return &Need[*T]{name: name, why: func(v *T, err error) string {
		if v == nil {
			return "cannot read " + what + ": " + errText(err)
		}
		return ""
	}}
}
