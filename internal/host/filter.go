// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"errors"
	"fmt"
	"regexp"
)

// DeviceFilter selects RDMA devices by name. An excluded device is never
// read by any source: reading restricted ConnectX-7 functions floods the
// kernel log. The zero value keeps every device.
type DeviceFilter struct {
	include, exclude *regexp.Regexp
}

// NewDeviceFilter compiles the --collector.infiniband.device-include and
// -exclude pair. The regexps are anchored: "mlx5_1" does not match
// "mlx5_10".
func NewDeviceFilter(include, exclude string) (DeviceFilter, error) {
	var f DeviceFilter
	if include != "" && exclude != "" {
		return f, errors.New("--collector.infiniband.device-include and --collector.infiniband.device-exclude are mutually exclusive")
	}
	var err error
	if include != "" {
		if f.include, err = regexp.Compile("^(?:" + include + ")$"); err != nil {
			return f, fmt.Errorf("--collector.infiniband.device-include: %w", err)
		}
	}
	if exclude != "" {
		if f.exclude, err = regexp.Compile("^(?:" + exclude + ")$"); err != nil {
			return f, fmt.Errorf("--collector.infiniband.device-exclude: %w", err)
		}
	}
	return f, nil
}

// Keep reports whether a device is read.
func (f DeviceFilter) Keep(name string) bool {
	if f.include != nil {
		return f.include.MatchString(name)
	}
	return f.exclude == nil || !f.exclude.MatchString(name)
}
