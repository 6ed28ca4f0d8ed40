// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package devlink asks the running kernel's devlink generic netlink
// family two things about the RDMA devices' PCI functions: the health
// reporters (DEVLINK_CMD_HEALTH_REPORTER_GET: mlx5's fw, fw_fatal, tx,
// rx, vnic with their state, error and recovery counts) and the firmware
// versions (DEVLINK_CMD_INFO_GET: the running and the stored version of
// each component, e.g. fw.version). Neither needs privileges. Only the
// live kernel answers: a fixture tree's devices are not the kernel's.
package devlink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

// Opt is a value that may be missing.
type Opt[T any] = sysattr.Opt[T]

func some[T any](v T) Opt[T] { return sysattr.Some(v) }

// Handle names a devlink instance: bus "pci", device "0000:3b:00.0".
type Handle struct {
	Bus, Device string
}

func (h Handle) String() string { return h.Bus + "/" + h.Device }

// PCI is the handle of a PCI function.
func PCI(address string) Handle { return Handle{Bus: "pci", Device: address} }

// State is a health reporter's state (enum devlink_health_reporter_state).
type State uint8

// The states include/uapi/linux/devlink.h defines (x/sys/unix has not
// got them).
const (
	StateHealthy State = 0
	StateError   State = 1
)

func (s State) String() string {
	switch s {
	case StateHealthy:
		return "healthy"
	case StateError:
		return "error"
	}
	return "state_" + strconv.Itoa(int(s))
}

// Reporter is one health reporter of a devlink instance or of one of its
// ports (mlx5 registers tx and rx on the uplink port since Linux 5.9).
type Reporter struct {
	Handle Handle
	// Port is DEVLINK_ATTR_PORT_INDEX of a port reporter.
	Port Opt[uint32]
	Name string
	// State is absent when the kernel sent none (it always does).
	State Opt[State]
	// Errors is how many errors the driver reported to it and Recovers
	// how many recoveries succeeded, since the driver registered it.
	Errors, Recovers Opt[uint64]
}

// Version is one named version of a component.
type Version struct {
	Name, Value string
}

// Info is the DEVLINK_CMD_INFO_GET reply of one instance.
type Info struct {
	Handle Handle
	Driver string
	// Fixed are hardware identifiers (fw.psid, the board id); Running the
	// versions running now; Stored those in flash, which the next
	// activation (mlxfwreset, reboot) runs. mlx5 reports a stored
	// fw.version equal to the running one when nothing is pending.
	Fixed, Running, Stored []Version
}

// Lookup returns the value of a version in a list.
func Lookup(vs []Version, name string) (string, bool) {
	for _, v := range vs {
		if v.Name == name {
			return v.Value, true
		}
	}
	return "", false
}

// ErrBadReply is a message that does not decode as the kernel writes it.
var ErrBadReply = errors.New("malformed devlink netlink reply")

func badf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadReply}, args...)...)
}

// decodeHandle handles the attributes every reply starts with.
func decodeHandle(ad *netlink.AttributeDecoder, h *Handle) bool {
	switch ad.Type() {
	case unix.DEVLINK_ATTR_BUS_NAME:
		h.Bus = ad.String()
	case unix.DEVLINK_ATTR_DEV_NAME:
		h.Device = ad.String()
	default:
		return false
	}
	return true
}

func u64(p []byte) (uint64, bool) {
	if len(p) != 8 {
		return 0, false
	}
	return binary.NativeEndian.Uint64(p), true
}

// DecodeReporter decodes one DEVLINK_CMD_HEALTH_REPORTER_GET reply (the
// generic netlink payload after its 4-byte header). Attributes this
// package does not use (graceful period, auto recover, dump timestamps)
// are skipped.
func DecodeReporter(b []byte) (Reporter, error) {
	var r Reporter
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return r, badf("%v", err)
	}
	nested := 0
	for ad.Next() {
		if decodeHandle(ad, &r.Handle) {
			continue
		}
		switch ad.Type() {
		case unix.DEVLINK_ATTR_PORT_INDEX:
			if p := ad.Bytes(); len(p) == 4 {
				r.Port = some(binary.NativeEndian.Uint32(p))
			} else {
				return Reporter{}, badf("port index of %d bytes", len(p))
			}
		case unix.DEVLINK_ATTR_HEALTH_REPORTER:
			nested++
			ad.Nested(func(nd *netlink.AttributeDecoder) error {
				for nd.Next() {
					p := nd.Bytes()
					switch nd.Type() {
					case unix.DEVLINK_ATTR_HEALTH_REPORTER_NAME:
						r.Name = nd.String()
					case unix.DEVLINK_ATTR_HEALTH_REPORTER_STATE:
						if len(p) != 1 {
							return fmt.Errorf("reporter state of %d bytes", len(p))
						}
						r.State = some(State(p[0]))
					case unix.DEVLINK_ATTR_HEALTH_REPORTER_ERR_COUNT:
						v, ok := u64(p)
						if !ok {
							return fmt.Errorf("error count of %d bytes", len(p))
						}
						r.Errors = some(v)
					case unix.DEVLINK_ATTR_HEALTH_REPORTER_RECOVER_COUNT:
						v, ok := u64(p)
						if !ok {
							return fmt.Errorf("recover count of %d bytes", len(p))
						}
						r.Recovers = some(v)
					}
				}
				return nil
			})
		}
	}
	if err := ad.Err(); err != nil {
		return Reporter{}, badf("%v", err)
	}
	switch {
	case r.Handle.Bus == "" || r.Handle.Device == "":
		return Reporter{}, badf("reporter without a devlink handle")
	case nested != 1:
		return Reporter{}, badf("%d health reporter attributes, want 1", nested)
	case r.Name == "":
		return Reporter{}, badf("health reporter without a name")
	}
	return r, nil
}

// DecodeInfo decodes one DEVLINK_CMD_INFO_GET reply.
func DecodeInfo(b []byte) (Info, error) {
	var in Info
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return in, badf("%v", err)
	}
	for ad.Next() {
		if decodeHandle(ad, &in.Handle) {
			continue
		}
		var dst *[]Version
		switch ad.Type() {
		case unix.DEVLINK_ATTR_INFO_DRIVER_NAME:
			in.Driver = ad.String()
			continue
		case unix.DEVLINK_ATTR_INFO_VERSION_FIXED:
			dst = &in.Fixed
		case unix.DEVLINK_ATTR_INFO_VERSION_RUNNING:
			dst = &in.Running
		case unix.DEVLINK_ATTR_INFO_VERSION_STORED:
			dst = &in.Stored
		default:
			continue
		}
		ad.Nested(func(nd *netlink.AttributeDecoder) error {
			var v Version
			var name, value bool
			for nd.Next() {
				switch nd.Type() {
				case unix.DEVLINK_ATTR_INFO_VERSION_NAME:
					v.Name, name = nd.String(), true
				case unix.DEVLINK_ATTR_INFO_VERSION_VALUE:
					v.Value, value = nd.String(), true
				}
			}
			if !name || !value || v.Name == "" {
				return fmt.Errorf("version without a name or a value")
			}
			*dst = append(*dst, v)
			return nil
		})
	}
	if err := ad.Err(); err != nil {
		return Info{}, badf("%v", err)
	}
	if in.Handle.Bus == "" || in.Handle.Device == "" {
		return Info{}, badf("info without a devlink handle")
	}
	return in, nil
}
