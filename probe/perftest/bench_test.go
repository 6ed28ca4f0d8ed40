// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package perftest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkParse parses each recorded result: the probe's own cost per run
// once perftest has printed its table.
func BenchmarkParse(b *testing.B) {
	entries, err := os.ReadDir(filepath.Join("testdata", "samples"))
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "ib_") || strings.Contains(name, "_help_") {
			continue
		}
		in := sample(b, name)
		b.Run(strings.TrimSuffix(name, ".txt"), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInterpret: a failed run, stderr classified.
func BenchmarkInterpret(b *testing.B) {
	stderr := sample(b, "error_completion_retry_exceeded_softiwarp_issue27.txt")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Interpret(nil, stderr, Exit{Code: 1}); err == nil {
			b.Fatal("no error")
		}
	}
}
