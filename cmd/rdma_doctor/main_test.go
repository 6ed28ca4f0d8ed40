// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"
	"time"
)

// Flag values that used to panic the mux or fail every collector stop
// start-up with a one-line error.
func TestCheckServeFlags(t *testing.T) {
	for _, tc := range []struct {
		path    string
		timeout time.Duration
		max     int
		ok      bool
	}{
		{"/metrics", 10 * time.Second, 40, true},
		{"/", 10 * time.Second, 0, true},
		{"", 10 * time.Second, 40, false},
		{"diagnose", 10 * time.Second, 40, false},
		{"/diagnose", 10 * time.Second, 40, false},
		{"/probe", 10 * time.Second, 40, false},
		{"/metrics", 0, 40, false},
		{"/metrics", -time.Second, 40, false},
		{"/metrics", time.Second, -1, false},
	} {
		if err := checkServeFlags(tc.path, tc.timeout, tc.max); (err == nil) != tc.ok {
			t.Errorf("%q %v %d: %v", tc.path, tc.timeout, tc.max, err)
		}
	}
}
