// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package devlink

// Component is one firmware component with a running and a stored
// version (mlx5: fw.version and fw).
type Component struct {
	Name, Running, Stored string
	// Pending is whether the stored version differs from the running one:
	// firmware burned into flash and not activated yet. Absent when either
	// version is one the driver reports for a failed query.
	Pending Opt[bool]
}

// Unreadable versions. mlx5 formats the firmware's 32-bit version as
// major.minor.subminor ("%d.%d.%04d"). Since commit 10dc35f6a443
// ("net/mlx5: Avoid \"No data available\" when FW version queries
// fail", March 2026, backported to 6.18 stable) a failed MCQI query
// reads U32_MAX (255.255.65535) and firmware without the query 0
// (0.0.0000); older kernels failed the whole INFO_GET instead.
var unreadableVersions = map[string]bool{
	"255.255.65535": true,
	"0.0.0000":      true,
}

// Unreadable reports whether a version is a driver's failed-query value.
func Unreadable(v string) bool { return unreadableVersions[v] }

// Components pairs the running and stored versions of an instance: one
// per component that has both, in the running list's order. A component
// only running (ice's fw.mgmt.api, firmware without a stored query) has
// no entry: nothing says whether an image is pending.
func Components(in Info) []Component {
	var out []Component
	for _, r := range in.Running {
		st, ok := Lookup(in.Stored, r.Name)
		if !ok {
			continue
		}
		c := Component{Name: r.Name, Running: r.Value, Stored: st}
		if !Unreadable(r.Value) && !Unreadable(st) {
			c.Pending = some(r.Value != st)
		}
		out = append(out, c)
	}
	return out
}
