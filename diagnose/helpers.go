// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/sysattr"
)

// portTarget is the target name of a port: "mlx5_0/1".
func portTarget(d *infiniband.Device, p *infiniband.Port) string {
	return d.Name + "/" + strconv.Itoa(p.Num)
}

// mlxlinkDev is what to pass to mlxlink/mlxconfig -d: the PCI address when
// known (works for every MFT tool), else the RDMA device name.
func mlxlinkDev(d *infiniband.Device) string {
	if d.PCIAddress != "" {
		return d.PCIAddress
	}
	return d.Name
}

// fileErr finds the read or parse error of one attribute of a device
// (rel is relative to the device directory: "ports/1/state").
func fileErr(d *infiniband.Device, rel string) error {
	suffix := "infiniband/" + d.Name + "/" + rel
	for _, err := range d.Errors {
		// The path is below the sysfs root the reader was given.
		if strings.HasSuffix(sysattr.ErrorPath(err), suffix) {
			return err
		}
	}
	return nil
}

// unreadable is the skip finding for a value that is missing: with its read
// error when there was one.
func unreadable(target string, d *infiniband.Device, rel string) Finding {
	why := rel + " is not provided by this driver"
	if err := fileErr(d, rel); err != nil {
		why = "cannot read " + rel + ": " + err.Error()
	}
	return Finding{Severity: Skip, Target: target, Evidence: why}
}

// isRNIC reports an iWARP device (node_type 4: RNIC): no subnet manager, no
// InfiniBand link semantics even where old kernels print "InfiniBand".
func isRNIC(d *infiniband.Device) bool {
	return d.NodeType.OK && d.NodeType.V.Value == infiniband.NodeTypeRNIC
}

// linkLayer returns the port's link layer, and false when the file did
// not say (infiniband.Port.IsInfiniBand is the default then).
func linkLayer(p *infiniband.Port) (string, bool) {
	if p.LinkLayer.OK {
		return p.LinkLayer.V, true
	}
	return infiniband.LinkLayerInfiniBand, false
}

// isIBPort reports an InfiniBand port of an InfiniBand device.
func isIBPort(d *infiniband.Device, p *infiniband.Port) bool {
	return p.IsInfiniBand() && !isRNIC(d)
}

// linkUp reports whether the port's physical link is up (known and 5).
func linkUp(p *infiniband.Port) bool {
	return p.PhysState.OK && p.PhysState.V.Value == infiniband.PhysStateLinkUp
}

func enumText(e infiniband.Enum) string {
	if e.Name == "" {
		return strconv.Itoa(e.Value)
	}
	return strconv.Itoa(e.Value) + ": " + e.Name
}

func gbps(g float64) string {
	return strconv.FormatFloat(g, 'f', -1, 64) + " Gb/sec"
}

// rateText is the rate as the kernel prints it.
func rateText(r infiniband.Rate) string {
	s := gbps(r.Gbps) + " (" + r.WidthLabel()
	if r.Speed != "" {
		s += " " + r.Speed
	}
	return s + ")"
}

// span formats a window for evidence: "10m0s", "15s".
func span(d time.Duration) string {
	if d >= time.Second {
		d = d.Round(time.Second)
	}
	return d.String()
}

// bytesText formats a byte count with binary units.
func bytesText(b float64) string {
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

// noTargets is the single finding of a check that found nothing to judge.
func noTargets(why string) []Finding {
	return []Finding{{Severity: Skip, Target: "host", Evidence: why}}
}
