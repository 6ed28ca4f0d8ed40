// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import "testing"

func TestUseColor(t *testing.T) {
	for _, tc := range []struct {
		tty      bool
		noColor  string
		term     string
		wantColr bool
	}{
		{true, "", "xterm-256color", true},
		{true, "", "", true},
		{false, "", "xterm", false},
		{true, "1", "xterm", false},
		{true, "0", "xterm", false}, // any value disables (no-color.org)
		{true, "", "dumb", false},
	} {
		env := map[string]string{"NO_COLOR": tc.noColor, "TERM": tc.term}
		if got := useColor(tc.tty, func(k string) string { return env[k] }); got != tc.wantColr {
			t.Errorf("useColor(tty=%v, NO_COLOR=%q, TERM=%q) = %v", tc.tty, tc.noColor, tc.term, got)
		}
	}
}
