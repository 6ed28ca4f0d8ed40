// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package kit

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

// OrText joins parts for evidence, or says def when there are none.
func OrText(parts []string, def string) string {
	if len(parts) == 0 {
		return def
	}
	return strings.Join(parts, " / ")
}

// PortTarget is the target name of a port: "mlx5_0/1".
func PortTarget(d *infiniband.Device, p *infiniband.Port) string {
	return d.Name + "/" + strconv.Itoa(p.Num)
}

// MlxlinkDev is what to pass to mlxlink/mlxconfig -d: the PCI address when
// known (works for every MFT tool), else the RDMA device name.
func MlxlinkDev(d *infiniband.Device) string {
	if d.PCIAddress != "" {
		return d.PCIAddress
	}
	return d.Name
}

// FileErr finds the read or parse error of one attribute of a device
// (rel is relative to the device directory: "ports/1/state").
func FileErr(d *infiniband.Device, rel string) error {
	suffix := "infiniband/" + d.Name + "/" + rel
	for _, err := range d.Errors {
		// The path is below the sysfs root the reader was given.
		if strings.HasSuffix(sysattr.ErrorPath(err), suffix) {
			return err
		}
	}
	return nil
}

// Unreadable is the skip finding for a value that is missing: with its read
// error when there was one.
func Unreadable(target string, d *infiniband.Device, rel string) diagnose.Finding {
	why := rel + " is not provided by this driver"
	if err := FileErr(d, rel); err != nil {
		why = "cannot read " + rel + ": " + err.Error()
	}
	return diagnose.Finding{Severity: diagnose.Skip, Target: target, Evidence: why}
}

// IsRNIC reports an iWARP device (node_type 4: RNIC): no subnet manager, no
// InfiniBand link semantics even where old kernels print "InfiniBand".
func IsRNIC(d *infiniband.Device) bool {
	return d.NodeType.OK && d.NodeType.V.Value == infiniband.NodeTypeRNIC
}

// LinkLayer returns the port's link layer, and false when the file did
// not say (infiniband.Port.IsInfiniBand is the default then).
func LinkLayer(p *infiniband.Port) (string, bool) {
	if p.LinkLayer.OK {
		return p.LinkLayer.V, true
	}
	return infiniband.LinkLayerInfiniBand, false
}

// IsIBPort reports an InfiniBand port of an InfiniBand device.
func IsIBPort(d *infiniband.Device, p *infiniband.Port) bool {
	return p.IsInfiniBand() && !IsRNIC(d)
}

// LinkUp reports whether the port's physical link is up (known and 5).
func LinkUp(p *infiniband.Port) bool {
	return p.PhysState.OK && p.PhysState.V.Value == infiniband.PhysStateLinkUp
}

// EnumText is a sysfs enum as the kernel prints it: "5: LinkUp".
func EnumText(e infiniband.Enum) string {
	if e.Name == "" {
		return strconv.Itoa(e.Value)
	}
	return strconv.Itoa(e.Value) + ": " + e.Name
}

// Gbps is a rate in Gb/sec as the kernel prints it.
func Gbps(g float64) string {
	return strconv.FormatFloat(g, 'f', -1, 64) + " Gb/sec"
}

// RateText is the rate as the kernel prints it.
func RateText(r infiniband.Rate) string {
	s := Gbps(r.Gbps) + " (" + r.WidthLabel()
	if r.Speed != "" {
		s += " " + r.Speed
	}
	return s + ")"
}

// BytesText formats a byte count with binary units.
func BytesText(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", b)
	}
	return fmt.Sprintf("%.1f %s", b, units[i])
}

// NoTargets is the single finding of a check that found nothing to judge.
func NoTargets(why string) []diagnose.Finding {
	return []diagnose.Finding{{Severity: diagnose.Skip, Target: "host", Evidence: why}}
}

// ForEachPort calls fn for every port of every RDMA device read.
func ForEachPort(s *diagnose.Reading, fn func(d *infiniband.Device, p *infiniband.Port)) {
	for i := range s.IB().Devices {
		d := &s.IB().Devices[i]
		for j := range d.Ports {
			fn(d, &d.Ports[j])
		}
	}
}

// IBDevice is the class's device of that name, or nil.
func IBDevice(s *diagnose.Reading, name string) *infiniband.Device {
	if s.IB() == nil {
		return nil
	}
	for i := range s.IB().Devices {
		if s.IB().Devices[i].Name == name {
			return &s.IB().Devices[i]
		}
	}
	return nil
}

// CompactList joins at most max items with sep, and counts the rest.
func CompactList(items []string, sep string, max int) string {
	if len(items) <= max {
		return strings.Join(items, sep)
	}
	return strings.Join(items[:max], sep) + fmt.Sprintf(" and %d more", len(items)-max)
}
