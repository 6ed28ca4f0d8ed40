// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hostfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadBoundedLimit: files an operator names (the configuration, the
// expected fabric topology, the node name map) are read with their own bound.
func TestReadBoundedLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fabric.topo")
	if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadBounded(p, 10); err != nil || string(b) != "0123456789" {
		t.Errorf("ReadBounded(10 bytes, limit 10) = %q, %v", b, err)
	}
	if _, err := ReadBounded(p, 5); err == nil || !strings.Contains(err.Error(), "over the 5-byte") {
		t.Errorf("ReadBounded(10 bytes, limit 5): error %v, want over the limit", err)
	}
	if _, err := ReadBounded(t.TempDir(), 5); err == nil || !strings.Contains(err.Error(), "a directory") {
		t.Errorf("ReadBounded(a directory): error %v", err)
	}
}
