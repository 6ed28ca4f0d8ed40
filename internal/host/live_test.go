// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

// requireLiveSysfs skips (fails in CI) where /sys is not a sysfs mount.
func requireLiveSysfs(t *testing.T) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs("/sys", &st); err != nil || uint64(st.Type) != sysfsMagic {
		testenv.SkipOrFail(t, "/sys is not a sysfs mount on this machine")
	}
}

// TestDetectLive: the tree decides, not its path. A fixture tree is never
// live; the running kernel's sysfs is live under any name, the container's
// /host/sys (here: a root whose sys links to /sys) included; the flag
// overrides both ways.
func TestDetectLive(t *testing.T) {
	fixture := filepath.Join("..", "..", "fixtures", "hosts", "dgx-h100", "sys")
	if l := DetectLive(LiveAuto, fixture); l.On || l.Reason != LiveReasonNotSysfs {
		t.Errorf("fixture tree: %+v, want off, %s", l, LiveReasonNotSysfs)
	}
	if l := DetectLive(LiveOn, fixture); !l.On || l.Reason != LiveReasonForced {
		t.Errorf("--host.live=true on a fixture: %+v", l)
	}
	if l := DetectLive(LiveAuto, filepath.Join(t.TempDir(), "absent")); l.On || l.Reason != LiveReasonUndecided {
		t.Errorf("missing tree: %+v, want off, %s", l, LiveReasonUndecided)
	}

	requireLiveSysfs(t)
	root := t.TempDir()
	if err := os.Symlink("/sys", filepath.Join(root, "sys")); err != nil {
		t.Fatal(err)
	}
	for _, sys := range []string{"/sys", "/sys/", filepath.Join(root, "sys")} {
		if l := DetectLive(LiveAuto, sys); !l.On || l.Reason != LiveReasonSysfs {
			t.Errorf("%s: %+v, want on, %s", sys, l, LiveReasonSysfs)
		}
	}
	if l := DetectLive(LiveOff, "/sys"); l.On || l.Reason != LiveReasonOff {
		t.Errorf("--host.live=false on /sys: %+v", l)
	}
}

// TestDetectLiveOtherNetns: in a network namespace of its own (a pod
// without hostNetwork), the host's sysfs is not live: netlink would answer
// for the pod's namespace.
func TestDetectLiveOtherNetns(t *testing.T) {
	if !testenv.InChild(t.Name()) {
		requireLiveSysfs(t)
		t.Log(testenv.InNamespaces(t, t.Name(), "-n"))
		return
	}
	// /sys was mounted in the parent's namespace and shows its netdevs.
	if l := DetectLive(LiveAuto, "/sys"); l.On || l.Reason != LiveReasonNetns {
		t.Errorf("/sys from another network namespace: %+v, want off, %s", l, LiveReasonNetns)
	}
}
