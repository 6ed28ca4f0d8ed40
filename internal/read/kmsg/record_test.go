// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package kmsg

import "testing"

func TestParseRecord(t *testing.T) {
	r, err := ParseRecord([]byte("3,1002,649335564,-;mlx5_core 0041:01:00.0: poll_health:817:(pid 0): Fatal error 1 detected\n SUBSYSTEM=pci\n DEVICE=+pci:0041:01:00.0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Facility != 0 || r.Level != 3 || r.Seq != 1002 || r.Usec != 649335564 || r.Cont ||
		string(r.Message) != "mlx5_core 0041:01:00.0: poll_health:817:(pid 0): Fatal error 1 detected" ||
		string(r.Device) != "+pci:0041:01:00.0" {
		t.Errorf("%+v", r)
	}
	// Extra header fields (the caller id of newer kernels) and a user
	// write's facility.
	r, err = ParseRecord([]byte("14,7,100,c,caller=T1;hello\n"))
	if err != nil || r.Facility != 1 || r.Level != 6 || !r.Cont || string(r.Message) != "hello" {
		t.Errorf("%+v %v", r, err)
	}
	for _, bad := range []string{"", "no header", "1,2;short", "x,1,2,-;msg", "1,x,2,-;msg", "1,2,x,-;msg"} {
		if _, err := ParseRecord([]byte(bad)); err == nil {
			t.Errorf("ParseRecord(%q) accepted", bad)
		}
	}
}
