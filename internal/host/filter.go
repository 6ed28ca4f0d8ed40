// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
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
		if f.include, err = CompileAnchored("--collector.infiniband.device-include", include); err != nil {
			return f, err
		}
	}
	if exclude != "" {
		if f.exclude, err = CompileAnchored("--collector.infiniband.device-exclude", exclude); err != nil {
			return f, err
		}
	}
	return f, nil
}

// CompileAnchored compiles a flag's regexp anchored at both ends, as
// node_exporter's include/exclude flags are. Its error quotes the value as
// typed, not the anchored expression the user never wrote.
func CompileAnchored(flag, value string) (*regexp.Regexp, error) {
	re, err := regexp.Compile("^(?:" + value + ")$")
	if err != nil {
		var se *syntax.Error
		if errors.As(err, &se) {
			return nil, fmt.Errorf("%s=%q: not a regular expression: %s", flag, value, se.Code)
		}
		return nil, fmt.Errorf("%s=%q: %w", flag, value, err)
	}
	return re, nil
}

// Keep reports whether a device is read.
func (f DeviceFilter) Keep(name string) bool {
	if f.include != nil {
		return f.include.MatchString(name)
	}
	return f.exclude == nil || !f.exclude.MatchString(name)
}
