// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteWakeups: tools/wakeups' JSON becomes one row per server, with
// the command that reruns it; no file says it was not measured.
func TestWriteWakeups(t *testing.T) {
	f := filepath.Join(t.TempDir(), "wakeups.json")
	if err := os.WriteFile(f, []byte(`[
  {"label": "rdma_doctor", "command": ["./rdma_doctor", "--path.rootfs=fixtures/hosts/dgx-h100"],
   "seconds": 90.02, "switches": 171, "voluntary": 116, "per_second": 1.8996, "threads": 7}
]`), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := readWakeups(f)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	writeWakeups(&sb, ws)
	for _, want := range []string{
		"## Idle wake-ups",
		"| rdma_doctor | 1.90 | 171 (116) | 90 s | 7 |",
		"- rdma_doctor: `rdma_doctor --path.rootfs=fixtures/hosts/dgx-h100`",
	} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("missing %q in\n%s", want, sb.String())
		}
	}
	sb.Reset()
	writeWakeups(&sb, nil)
	if !strings.Contains(sb.String(), "Not measured in this run.") {
		t.Errorf("no results:\n%s", sb.String())
	}
}
