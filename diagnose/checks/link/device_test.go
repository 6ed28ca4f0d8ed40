// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package link

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/diagnosetest"
)

// The bus is walked only on a host short of devices: none, or fewer than
// diagnose.expected_devices.
func TestBusReadOnlyWhenShort(t *testing.T) {
	root := filepath.Join(diagnosetest.Fixtures, "cx6-hdr-fdr")
	for _, tc := range []struct {
		expected int
		read     bool
	}{{0, false}, {2, false}, {3, true}} {
		s := (&diagnose.Reader{Host: diagnosetest.HostOf(root), ExpectedDevices: tc.expected}).Read(context.Background())
		bus, err := s.Host.Bus()
		if (bus != nil) != tc.read || err != nil {
			t.Errorf("expected_devices %d: bus %v, %v; want read %v", tc.expected, bus, err, tc.read)
		}
	}
	cfg := diagnosetest.MustParse(t, "diagnose:\n  expected_devices: 3\n")
	s := (&diagnose.Reader{Host: diagnosetest.HostOf(root), ExpectedDevices: 3}).Read(context.Background())
	fs, err := checkDevPresent(s, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if f := diagnosetest.FindingOf(t, fs, "host"); f.Severity != diagnose.Fail || !strings.Contains(f.Observed, "every RDMA-capable function on the PCI bus has its RDMA device") {
		t.Errorf("3 expected, 2 present: %+v", f)
	}
}
