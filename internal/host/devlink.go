// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"errors"
	"sort"

	"github.com/rdma-doctor/rdma_doctor/internal/read/devlink"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

// Devlink is what the running kernel's devlink family says of the kept
// RDMA devices, each joined to its devlink instance by PCI address
// (bus "pci", device "0000:3b:00.0").
type Devlink struct {
	Devices []DevlinkDevice
	// Health and Info are the reads: their outcomes, errors and skipped
	// values. Info is nil until the first firmware read.
	Health, Info *devlink.Snapshot
}

// DevlinkDevice is one RDMA device's devlink view.
type DevlinkDevice struct {
	// Name is the RDMA device, PCI its function.
	Name, PCI string
	// Reporters are the health reporters of the instance and of its
	// ports (mlx5: fw and fw_fatal on the instance, tx, rx on the uplink
	// port, vnic on both).
	Reporters []devlink.Reporter
	// Info is the instance's firmware versions; nil when the driver
	// registers no devlink instance or the read failed.
	Info *devlink.Info
}

// devlinkSource is the firmware versions of the kept devices' PCI
// functions (slow: see Devlink). Only Devlink reads it, once it has
// found the conn and the class.
var devlinkSource = register(&Source[*devlink.Snapshot]{name: "devlink", read: func(ctx context.Context, s *Snapshot) (*devlink.Snapshot, error) {
	c := s.h.opts.Devlink
	if c == nil {
		return nil, ErrNotLive
	}
	class, err := s.Class(ctx)
	if class == nil {
		return nil, err
	}
	_, _, handles := devlinkFunctions(class)
	return devlink.Read(ctx, c, devlink.Options{Handles: handles, Info: true}), nil
}})

// devlinkFunctions is a device entry for each of the class's devices with
// a PCI function, the entries of each function, and the functions in
// order.
func devlinkFunctions(class *infiniband.Class) ([]DevlinkDevice, map[devlink.Handle][]int, []devlink.Handle) {
	var devs []DevlinkDevice
	byPCI := map[devlink.Handle][]int{}
	for _, d := range class.Devices {
		if d.PCIAddress == "" {
			// Software devices (rxe, siw) have no PCI function.
			continue
		}
		h := devlink.PCI(d.PCIAddress)
		byPCI[h] = append(byPCI[h], len(devs))
		devs = append(devs, DevlinkDevice{Name: d.Name, PCI: d.PCIAddress})
	}
	handles := make([]devlink.Handle, 0, len(byPCI))
	for h := range byPCI {
		handles = append(handles, h)
	}
	sort.Slice(handles, func(i, j int) bool { return handles[i].Device < handles[j].Device })
	return devs, byPCI, handles
}

// Devlink reads the health reporters now (the dump asks no driver
// anything: it copies the counters devlink keeps) and the firmware
// versions on the slow interval (INFO_GET runs firmware queries on each
// function: mlx5 sends MCQI and MCQS access-register commands). Only the
// kept devices' functions are asked for versions; the reporter dump
// covers every instance and is cut to them. ErrNotLive when Options.
// Devlink is nil (a fixture tree).
func (s *Snapshot) Devlink(ctx context.Context) (*Devlink, error) {
	return s.devlink.get(func() (*Devlink, error) {
		c := s.h.opts.Devlink
		if c == nil {
			return nil, ErrNotLive
		}
		class, err := s.Class(ctx)
		if class == nil {
			return nil, err
		}
		devs, byPCI, handles := devlinkFunctions(class)
		out := &Devlink{Devices: devs}
		out.Health = devlink.Read(ctx, c, devlink.Options{Handles: handles, Health: true})
		for _, r := range out.Health.Reporters {
			for _, i := range byPCI[r.Handle] {
				out.Devices[i].Reporters = append(out.Devices[i].Reporters, r)
			}
		}
		out.Info, _ = get(ctx, s, devlinkSource)
		if out.Info != nil {
			for k := range out.Info.Infos {
				in := &out.Info.Infos[k]
				for _, i := range byPCI[in.Handle] {
					out.Devices[i].Info = in
				}
			}
		}
		return out, nil
	})
}

// NeedDevlink judges a Devlink reading: asked only of the live kernel,
// and a kernel may have no devlink family at all.
var NeedDevlink = &Need[*Devlink]{name: "devlink", why: func(d *Devlink, err error) string {
	if d == nil {
		if errors.Is(err, ErrNotLive) {
			return "devlink is asked only of the running kernel (this tree is not the live /sys) and only with the devlink collector on"
		}
		return "cannot read devlink: " + errText(err)
	}
	if d.Health != nil && d.Health.Outcomes[devlink.QueryHealth][devlink.StatusNoDevlink] > 0 {
		return "this kernel has no devlink family (CONFIG_NET_DEVLINK)"
	}
	return ""
}}
