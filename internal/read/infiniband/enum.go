// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package infiniband

import (
	"fmt"
	"strconv"
	"strings"
)

// Enum is a sysfs "<number>: <name>" attribute: state, phys_state and
// node_type. The number is what the kernel means; the name is for humans and
// has been wrong in recorded data ("4: ACTIVE" in a phys_state file), so
// consumers should trust the number.
type Enum struct {
	Value int
	Name  string
}

// ParseEnum parses "4: ACTIVE", "5: LinkUp", "1: CA", "7: Phy Test".
func ParseEnum(s string) (Enum, error) {
	s = strings.TrimSpace(s)
	num, name, ok := strings.Cut(s, ":")
	if !ok {
		return Enum{}, fmt.Errorf("%q: want \"<number>: <name>\"", s)
	}
	v, err := strconv.Atoi(num)
	if err != nil || v < 0 || v > 255 {
		return Enum{}, fmt.Errorf("%q: bad number %q", s, num)
	}
	return Enum{Value: v, Name: strings.TrimSpace(name)}, nil
}

// Port states (ib_port_state) and physical states (IB spec PortPhysicalState).
const (
	StateDown        = 1
	StateInit        = 2
	StateArmed       = 3
	StateActive      = 4
	StateActiveDefer = 5

	PhysStateSleep    = 1
	PhysStatePolling  = 2
	PhysStateDisabled = 3
	PhysStateTraining = 4
	PhysStateLinkUp   = 5
	PhysStateErrRecov = 6
	PhysStatePhyTest  = 7
)

// Node types (rdma_node_type + 1, as node_type prints them).
const (
	NodeTypeCA     = 1
	NodeTypeSwitch = 2
	NodeTypeRouter = 3
	NodeTypeRNIC   = 4
)

// ParseHex parses "0x%x" attributes (lid, sm_lid, cap_mask).
func ParseHex(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	h, ok := strings.CutPrefix(s, "0x")
	if !ok {
		return 0, fmt.Errorf("%q: want 0x<hex>", s)
	}
	v, err := strconv.ParseUint(h, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: bad hex number", s)
	}
	return v, nil
}

// ParseUint parses a decimal attribute (sm_sl, lid_mask_count).
func ParseUint(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: not an unsigned integer", s)
	}
	return v, nil
}

// ParseGUID parses node_guid and sys_image_guid ("%04x:%04x:%04x:%04x") and
// returns it as ibstat prints it ("0x0a7fbc1245efd23b").
func ParseGUID(s string) (string, error) {
	s = strings.TrimSpace(s)
	if len(s) != 19 || s[4] != ':' || s[9] != ':' || s[14] != ':' {
		return "", fmt.Errorf("GUID %q: want xxxx:xxxx:xxxx:xxxx", s)
	}
	h := s[0:4] + s[5:9] + s[10:14] + s[15:19]
	if _, err := strconv.ParseUint(h, 16, 64); err != nil {
		return "", fmt.Errorf("GUID %q: not hexadecimal", s)
	}
	return "0x" + strings.ToLower(h), nil
}

// ParsePortGUID parses an InfiniBand port's GID 0 (ports/N/gids/0, eight
// "%04x" groups) and returns its low 64 bits, the port GUID, as ibstat
// prints "Port GUID" ("0x0002c9030031fdc1"). Both halves of a GID are in
// node_guid's format, so ParseGUID checks each. The high half is the
// subnet prefix (fe80:: unless the subnet manager assigns another) and is
// not judged. A zero low half is no port GUID (the IB spec gives every
// port a non-zero EUI-64): it cannot identify a link and is refused.
// Only an InfiniBand port's GID 0 holds a port GUID: a RoCE GID 0 is the
// netdev MAC's link-local address and an iWARP one the MAC itself.
func ParsePortGUID(s string) (string, error) {
	s = strings.TrimSpace(s)
	if len(s) != 39 || s[19] != ':' {
		return "", fmt.Errorf("GID %q: want xxxx:xxxx:xxxx:xxxx:xxxx:xxxx:xxxx:xxxx", s)
	}
	if _, err := ParseGUID(s[:19]); err != nil {
		return "", fmt.Errorf("GID %q: subnet prefix not hexadecimal", s)
	}
	g, err := ParseGUID(s[20:])
	if err != nil {
		return "", fmt.Errorf("GID %q: port GUID not hexadecimal", s)
	}
	if g == "0x0000000000000000" {
		return "", fmt.Errorf("GID %q: zero port GUID", s)
	}
	return g, nil
}
