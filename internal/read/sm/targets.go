// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package sm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

// Target is a local port sminfo can query through: sminfo -C Device -P Port.
type Target struct {
	Device string
	Port   int
}

func (t Target) String() string { return fmt.Sprintf("%s/%d", t.Device, t.Port) }

// UmadDir is the class directory of the user MAD devices below sysfs.
const UmadDir = "class/infiniband_mad"

// Umad is one /sys/class/infiniband_mad/umadN: the RDMA device and port that
// /dev/infiniband/umadN sends management datagrams through.
type Umad struct {
	Name   string // umad0
	Device string
	Port   int
}

// ReadUmads lists the umad devices. A host without ib_umad loaded has no
// class directory: that is ErrNoUmad, not a failure, and sminfo cannot run
// there.
func ReadUmads(sys hostfs.FS) ([]Umad, error) {
	entries, err := sys.ReadDir(UmadDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, ErrNoUmad
		}
		return nil, err
	}
	var out []Umad
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "umad") {
			continue // issmN (the IsSM switch), abi_version
		}
		dir := UmadDir + "/" + e.Name()
		dev, err := sys.ReadFile(dir + "/ibdev")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pb, err := sys.ReadFile(dir + "/port")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		port, err := infiniband.ParseUint(string(pb))
		if err != nil || port == 0 || port > 255 {
			errs = append(errs, fmt.Errorf("parse %s/port: %q", dir, strings.TrimSpace(string(pb))))
			continue
		}
		out = append(out, Umad{Name: e.Name(), Device: strings.TrimSpace(string(dev)), Port: int(port)})
	}
	return out, errors.Join(errs...)
}

// ErrNoUmad means the host has no /sys/class/infiniband_mad: ib_umad is not
// loaded and no MAD tool (sminfo, iblinkinfo, opensm) can work.
var ErrNoUmad = errors.New("no " + UmadDir + " directory: ib_umad not loaded, MAD tools cannot run")

// Targets returns the ports to run sminfo on: InfiniBand ports that are
// ACTIVE (an SM has brought them up, so there is an SM to ask) and have a
// umad device. RoCE ports have no SM. class is the host snapshot's class
// source (already filtered by the device include/exclude flags, so an
// excluded device is never read): the ports' state is read once, not again
// for every sminfo round.
func Targets(ctx context.Context, sys hostfs.FS, class ClassSource) ([]Target, error) {
	umads, uerr := ReadUmads(sys)
	if errors.Is(uerr, ErrNoUmad) {
		return nil, uerr
	}
	c, err := class(ctx)
	if errors.Is(err, infiniband.ErrNoClass) {
		return nil, err
	}
	if c == nil {
		return nil, err
	}
	var out []Target
	for _, u := range umads {
		if p := findPort(c, u.Device, u.Port); p != nil && IsActiveIB(p) {
			out = append(out, Target{Device: u.Device, Port: u.Port})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Device != out[j].Device {
			return out[i].Device < out[j].Device
		}
		return out[i].Port < out[j].Port
	})
	// Per-device read errors are the infiniband collector's to report.
	return out, errors.Join(uerr, err)
}

// DevDir is where the umad device nodes live below the root file system.
const DevDir = "dev/infiniband"

// ErrNoUmadDevice means ib_umad is loaded (sysfs lists umad devices) but
// the root file system has no /dev/infiniband/umadN node for them: in a
// container, /dev/infiniband is not mounted, so no MAD tool can work.
var ErrNoUmadDevice = errors.New("no /" + DevDir + "/umad* device nodes below the root file system: MAD tools cannot run (mount /dev/infiniband)")

// TargetsOn is Targets restricted to ports whose umad device node exists
// below the host's root (/dev/infiniband/umadN): sminfo opens it, so a
// port without one cannot be queried. The node is only listed, never
// opened.
func TargetsOn(ctx context.Context, host hostfs.Host, class ClassSource) ([]Target, error) {
	all, err := Targets(ctx, host.Sys, class)
	if len(all) == 0 {
		return nil, err // nothing to query: no need for device nodes
	}
	umads, _ := ReadUmads(host.Sys) // Targets read them already; errors reported there
	entries, derr := host.Root.ReadDir(DevDir)
	if derr != nil {
		if errors.Is(derr, fs.ErrNotExist) {
			return nil, ErrNoUmadDevice
		}
		return nil, fmt.Errorf("listing /%s: %w", DevDir, derr)
	}
	nodes := map[string]bool{}
	for _, e := range entries {
		nodes[e.Name()] = true
	}
	have := map[Target]bool{}
	for _, u := range umads {
		if nodes[u.Name] {
			have[Target{u.Device, u.Port}] = true
		}
	}
	var out []Target
	for _, t := range all {
		if have[t] {
			out = append(out, t)
		}
	}
	if len(out) == 0 && err == nil {
		err = ErrNoUmadDevice
	}
	return out, err
}

func findPort(c *infiniband.Class, dev string, port int) *infiniband.Port {
	for i := range c.Devices {
		d := &c.Devices[i]
		if d.Name != dev {
			continue
		}
		for j := range d.Ports {
			if d.Ports[j].Num == port {
				return &d.Ports[j]
			}
		}
	}
	return nil
}

// ClassSource reads the RDMA class: a host snapshot's Class, or
// infiniband.Read bound to a tree in tests.
type ClassSource func(ctx context.Context) (*infiniband.Class, error)

// IsInfiniBand reports whether a port's link layer is InfiniBand (Omni-Path
// hfi1 ports say so too, and have an SM): the port type's one meaning.
func IsInfiniBand(p *infiniband.Port) bool { return p.IsInfiniBand() }

// IsActiveIB reports whether an InfiniBand port is ACTIVE (or ACTIVE_DEFER).
func IsActiveIB(p *infiniband.Port) bool {
	return IsInfiniBand(p) && p.State.OK &&
		(p.State.V.Value == infiniband.StateActive || p.State.V.Value == infiniband.StateActiveDefer)
}

// PortHasSM judges, from sysfs alone, whether a subnet manager has swept a
// port. ok is false when there is nothing to judge: a non-InfiniBand port
// (RoCE has no SM), a port whose link is not up (no SM could reach it
// anyway), or unreadable state/sm_lid files. Otherwise has is true when the
// SM has configured the port (ARMED or ACTIVE) and the port knows the SM's
// LID; a LinkUp port stuck in INIT, or with SM LID 0, has no working SM.
func PortHasSM(p *infiniband.Port) (has, ok bool) {
	if !IsInfiniBand(p) || !p.PhysState.OK || p.PhysState.V.Value != infiniband.PhysStateLinkUp ||
		!p.State.OK || !p.SMLID.OK {
		return false, false
	}
	switch p.State.V.Value {
	case infiniband.StateArmed, infiniband.StateActive, infiniband.StateActiveDefer:
		return p.SMLID.V != 0, true
	}
	return false, true
}
