// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LiveMode is --host.live: whether the sources only the running kernel
// answers (netlink: RDMA, devlink, DCB; the pause ioctl; rdmamap's fixed
// /sys paths) describe the tree being read.
type LiveMode string

const (
	// LiveAuto decides from what the tree is: a sysfs mount seen from the
	// process's own network namespace (DetectLive).
	LiveAuto LiveMode = "auto"
	// LiveOn asserts the tree is the running kernel's, whatever it looks like.
	LiveOn LiveMode = "true"
	// LiveOff never asks the kernel: the tree is a recording or another host.
	LiveOff LiveMode = "false"
)

// LiveModes lists the values --host.live accepts, in --help order.
var LiveModes = []string{string(LiveAuto), string(LiveOn), string(LiveOff)}

// Reasons a Live decision gives, the reason label of rdma_host_live_kernel.
// A bounded set: each names what an operator changes to turn the sources on.
const (
	LiveReasonSysfs     = "sysfs_same_netns" // auto: sysfs, same network namespace
	LiveReasonForced    = "flag_true"        // --host.live=true
	LiveReasonOff       = "flag_false"       // --host.live=false
	LiveReasonNotSysfs  = "not_sysfs"        // auto: the tree is not a sysfs mount (a fixture, a copy)
	LiveReasonNetns     = "other_netns"      // auto: sysfs of another network namespace (pod without hostNetwork)
	LiveReasonUndecided = "unreadable"       // auto: the check itself failed
)

// Live is whether the live-kernel sources are on, and why.
type Live struct {
	On     bool
	Reason string
	// Detail is a sentence for the start-up log: what was found and what to
	// do about it. Not a label.
	Detail string
}

// sysfsMagic is SYSFS_MAGIC from the kernel's include/uapi/linux/magic.h.
const sysfsMagic = 0x62656572

// DetectLive decides whether sysfsRoot is the running kernel's sysfs as this
// process sees it. The path is not the test: the shipped container reads the
// host's /sys at /host/sys (--path.rootfs=/host), and a fixture could sit at
// /sys in a chroot. Two facts decide instead:
//   - the tree is a sysfs mount (statfs magic), so the kernel answering
//     netlink is the one that made it;
//   - its class/net lists the same netdevs, by name and ifindex, as the
//     process's own network namespace: sysfs shows the netdevs of the
//     namespace it was mounted in, while netlink, devlink and ethtool answer
//     for the namespace the process is in. A pod without hostNetwork has its
//     own, where the host's RDMA netdevs and devlink instances are absent.
//
// Comparing netdev sets needs no privilege; reading /proc/1/ns/net (the
// host's namespace) would need CAP_SYS_PTRACE, which the image does not have.
func DetectLive(mode LiveMode, sysfsRoot string) Live {
	switch mode {
	case LiveOn:
		return Live{On: true, Reason: LiveReasonForced, Detail: "--host.live=true: the live-kernel sources are on whatever " + sysfsRoot + " is"}
	case LiveOff:
		return Live{Reason: LiveReasonOff, Detail: "--host.live=false: the live-kernel sources (rdma_netlink, devlink, RoCE DCB and pause) are off"}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(sysfsRoot, &st); err != nil {
		return Live{Reason: LiveReasonUndecided, Detail: fmt.Sprintf("cannot tell whether %s is the running kernel's sysfs (%v): the live-kernel sources are off; --host.live=true turns them on", sysfsRoot, err)}
	}
	if uint64(st.Type) != sysfsMagic {
		return Live{Reason: LiveReasonNotSysfs, Detail: fmt.Sprintf("%s is not a sysfs mount (file system magic %#x): it is read as a recorded tree, and the live-kernel sources are off", sysfsRoot, uint64(st.Type))}
	}
	same, err := sameNetns(sysfsRoot)
	if err != nil {
		return Live{Reason: LiveReasonUndecided, Detail: fmt.Sprintf("%s is sysfs, but its network namespace cannot be compared with the process's (%v): the live-kernel sources are off; --host.live=true turns them on", sysfsRoot, err)}
	}
	if !same {
		return Live{Reason: LiveReasonNetns, Detail: fmt.Sprintf("%s is sysfs of another network namespace than the process's: netlink and devlink would answer for the wrong one, so the live-kernel sources are off; run in the host's network namespace (Kubernetes hostNetwork: true, podman/docker --net=host)", sysfsRoot)}
	}
	return Live{On: true, Reason: LiveReasonSysfs, Detail: sysfsRoot + " is the running kernel's sysfs in this process's network namespace: the live-kernel sources are on"}
}

// sameNetns compares the netdevs <sysfsRoot>/class/net lists (name and
// ifindex) with those of the process's network namespace. Every namespace
// has lo at ifindex 1, so two namespaces agree only if all the rest agree
// too; a netdev that appears between the two reads makes one retry.
func sameNetns(sysfsRoot string) (bool, error) {
	var err error
	for range 2 {
		var tree, own []string
		if tree, err = sysfsNetdevs(filepath.Join(sysfsRoot, "class", "net")); err != nil {
			return false, err
		}
		if own, err = processNetdevs(); err != nil {
			return false, err
		}
		if slices.Equal(tree, own) {
			return true, nil
		}
	}
	return false, err
}

// maxNetdevs bounds the comparison: a host with more netdevs than this is
// compared on its first maxNetdevs entries by name.
const maxNetdevs = 4096

func sysfsNetdevs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if len(out) == maxNetdevs {
			break
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "ifindex"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed between the listing and the read
		}
		if err != nil {
			return nil, err
		}
		out = append(out, e.Name()+"="+strings.TrimSpace(string(b)))
	}
	sort.Strings(out)
	return out, nil
}

func processNetdevs() ([]string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ifs))
	for _, i := range ifs {
		out = append(out, i.Name+"="+strconv.Itoa(i.Index))
	}
	sort.Strings(out)
	if len(out) > maxNetdevs {
		out = out[:maxNetdevs]
	}
	return out, nil
}
