// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"strings"
	"testing"
)

// TestDeviceFilter: the regexps are anchored, include and exclude are
// exclusive, and a bad regexp is quoted as typed.
func TestDeviceFilter(t *testing.T) {
	f, err := NewDeviceFilter("mlx5_1", "")
	if err != nil || !f.Keep("mlx5_1") || f.Keep("mlx5_10") {
		t.Errorf("include mlx5_1: err %v, keeps mlx5_1 %v, mlx5_10 %v", err, f.Keep("mlx5_1"), f.Keep("mlx5_10"))
	}
	f, err = NewDeviceFilter("", "mlx5_[0-3]")
	if err != nil || f.Keep("mlx5_2") || !f.Keep("mlx5_4") {
		t.Errorf("exclude mlx5_[0-3]: err %v", err)
	}
	if _, err := NewDeviceFilter("a", "b"); err == nil {
		t.Error("include and exclude together accepted")
	}
	_, err = NewDeviceFilter("mlx5_(0", "")
	want := `--collector.infiniband.device-include="mlx5_(0": not a regular expression: missing closing )`
	if err == nil || err.Error() != want {
		t.Errorf("bad regexp: %v, want %s", err, want)
	}
	if err != nil && strings.Contains(err.Error(), "^(?:") {
		t.Errorf("the error shows the anchored expression nobody typed: %v", err)
	}
}
