// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	_ "embed"
	"fmt"
	"strings"
)

// emptyOnDemo is empty_on_demo.txt: the dashboard queries that return
// nothing on make demo, each with the reason.
//
//go:embed empty_on_demo.txt
var emptyOnDemo string

// EmptyOnDemo parses empty_on_demo.txt: a line "[REASON]" names the reason
// of the entries below it, an entry is "FILE | PANEL | EXPR" with EXPR as
// the dashboard writes it, # starts a comment. It returns the reason of
// every entry, by query (File, Where, Expr).
func EmptyOnDemo() (map[Query]string, error) {
	out := map[Query]string{}
	reason := ""
	for i, l := range strings.Split(emptyOnDemo, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
			continue
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			reason = strings.TrimSpace(l[1 : len(l)-1])
			if reason == "" {
				return nil, fmt.Errorf("empty_on_demo.txt:%d: empty reason", i+1)
			}
			continue
		}
		// The expression is last: it may hold " | " itself, the file
		// name and panel title do not.
		parts := strings.SplitN(l, " | ", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("empty_on_demo.txt:%d: want FILE | PANEL | EXPR, got %q", i+1, l)
		}
		if reason == "" {
			return nil, fmt.Errorf("empty_on_demo.txt:%d: an entry before the first [reason]", i+1)
		}
		q := Query{File: parts[0], Where: parts[1], Expr: parts[2]}
		if _, dup := out[q]; dup {
			return nil, fmt.Errorf("empty_on_demo.txt:%d: listed twice", i+1)
		}
		out[q] = reason
	}
	return out, nil
}

// EmptyLine is q as an entry of empty_on_demo.txt.
func EmptyLine(q Query) string { return q.File + " | " + q.Where + " | " + q.Expr }
