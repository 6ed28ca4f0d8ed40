// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package kit

import (
	"strconv"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
)

// NonEmpty is s as a list: none when s is empty.
func NonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// Judge returns the severity of an increase under a limit.
func Judge(inc uint64, l config.Limit) diagnose.Severity {
	switch {
	case l.FailAbove != nil && inc > *l.FailAbove:
		return diagnose.Fail
	case l.WarnAbove != nil && inc > *l.WarnAbove:
		return diagnose.Warn
	}
	return diagnose.Pass
}

// ExpectedText groups counters with the same limit: "symbol_error: warn
// above 0, fail above 10 per window".
func ExpectedText(names []string, cfg *config.Config) string {
	var groups []string
	byLimit := map[string][]string{}
	for _, n := range names {
		lt := LimitText(cfg.Diagnose.CounterLimit(n))
		if _, ok := byLimit[lt]; !ok {
			groups = append(groups, lt)
		}
		byLimit[lt] = append(byLimit[lt], n)
	}
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = strings.Join(byLimit[g], ", ") + ": " + g
	}
	return "increase per window: " + strings.Join(parts, "; ")
}

// LimitText is a counter limit as evidence says it.
func LimitText(l config.Limit) string {
	var parts []string
	if l.WarnAbove != nil {
		parts = append(parts, "warn above "+strconv.FormatUint(*l.WarnAbove, 10))
	}
	if l.FailAbove != nil {
		parts = append(parts, "fail above "+strconv.FormatUint(*l.FailAbove, 10))
	}
	if len(parts) == 0 {
		return "reported only"
	}
	return strings.Join(parts, ", ")
}
