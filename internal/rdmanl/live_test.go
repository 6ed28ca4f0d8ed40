// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package rdmanl

import (
	"context"
	"testing"
	"time"
)

// TestLiveKernel asks the running kernel. Without RDMA devices (CI) the
// device dump is empty or the socket family is missing (no ib_core); both
// are real answers and neither is an error.
func TestLiveKernel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := Read(ctx, Live{}, Options{Stats: true, Status: true, Resources: true})
	dev := s.Outcomes[QueryDevice]
	if len(dev) != 1 {
		t.Fatalf("device dump outcomes %v, want exactly one", dev)
	}
	switch {
	case dev[StatusOK] == 1:
		t.Logf("kernel has RDMA netlink, %d devices", len(s.Devices))
		if len(s.Devices) == 0 && (len(s.Stats) != 0 || s.Outcomes[QueryStatistic] != nil) {
			t.Errorf("no devices but statistics %v %v", s.Stats, s.Outcomes[QueryStatistic])
		}
		if s.Outcomes[QueryResource][StatusOK] != 1 {
			t.Errorf("resource dump outcomes %v", s.Outcomes[QueryResource])
		}
	case dev[StatusNoNetlink] == 1:
		t.Logf("no NETLINK_RDMA on this kernel")
		if len(s.Outcomes) != 1 {
			t.Errorf("outcomes after no socket family: %v", s.Outcomes)
		}
	default:
		t.Fatalf("device dump outcomes %v, errors %v", dev, s.Errors)
	}
	for _, err := range s.Errors {
		t.Errorf("error: %v", err)
	}
}
