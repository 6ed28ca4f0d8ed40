// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package gpu

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/names"
)

// A GPU's driver name is a label value (rdma_gpu_info{driver}): on a copy
// of hgx-h100 whose first GPU is rebound to a driver of a 200-byte name,
// the name is cut to names.MaxLabelBytes and the cut counted.
func TestDriverNameBounded(t *testing.T) {
	root := t.TempDir()
	hostfstest.CopyTree(t, "../../../fixtures/hosts/hgx-h100", root)
	p, err := hostfs.Paths{Rootfs: root}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Read(context.Background(), p.Open(), Options{})
	if err != nil || len(s.GPUs) == 0 {
		t.Fatalf("%d GPUs, %v", len(s.GPUs), err)
	}
	addr := s.GPUs[0].Address
	long := "nvidia_" + strings.Repeat("x", 193)
	link := filepath.Join(root, "sys/bus/pci/devices", addr, "driver")
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../bus/pci/drivers/"+long, link); err != nil {
		t.Fatal(err)
	}
	cut := names.Limited(names.Cut)
	s, err = Read(context.Background(), p.Open(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range s.GPUs {
		if g.Address == addr && (len(g.Driver) != names.MaxLabelBytes || !strings.HasPrefix(long, g.Driver)) {
			t.Errorf("GPU %s: driver %d bytes %q", addr, len(g.Driver), g.Driver)
		}
	}
	if names.Limited(names.Cut) == cut {
		t.Error("the cut is not counted")
	}
}
