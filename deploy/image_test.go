// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

// The images are built with podman from the repository alone, and run the
// way a container runtime would: podman run cannot start containers on
// every CI machine (no CAP_SYS_RESOURCE for crun's rlimits, hybrid
// cgroups), so the test unpacks the image with umoci and runs its own
// entrypoint and command, as its own user, chrooted into its root file
// system in a private mount and PID namespace with the fixture host
// bind-mounted read-only at /host.

func requireImageTools(t *testing.T) (podman, umoci string) {
	t.Helper()
	testenv.Long(t, "builds and unpacks an image with podman")
	requireRoot(t)
	podman = testenv.RequireTool(t, "podman", "podman not installed (Debian: apt-get install podman; .ci/run does)")
	umoci = testenv.RequireTool(t, "umoci", "umoci not installed (Debian: apt-get install umoci; .ci/run does)")
	testenv.RequireTool(t, "unshare", "unshare not installed (Debian: util-linux)")
	return podman, umoci
}

// buildContext lays out what the Dockerfiles copy: the promu-style
// .build/OS-ARCH/rdma_doctor and LICENSE.
func buildContext(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, ".build", "linux-"+runtime.GOARCH)
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	buildStatic(t, bin, "rdma_doctor")
	b, err := os.ReadFile(filepath.Join("..", "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "LICENSE"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// podmanBuild builds dockerfile (relative to the repository root) in ctx as
// tag; the image is removed at the end of the test. chroot isolation: RUN
// steps need no cgroups or rlimits of their own.
func podmanBuild(t *testing.T, podman, ctx, dockerfile, tag string, buildArgs ...string) {
	t.Helper()
	args := []string{"build", "--isolation=chroot", "--pull=never", "-q", "-t", tag,
		"-f", filepath.Join("..", dockerfile), "--build-arg", "ARCH=" + runtime.GOARCH}
	for _, a := range buildArgs {
		args = append(args, "--build-arg", a)
	}
	if out, err := run(t, podman, append(args, ctx)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = run(t, podman, "rmi", "-f", tag) })
}

// imageConfig is the part of podman's image inspection the tests read.
type imageConfig struct {
	Config struct {
		User         string              `json:"User"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
		Entrypoint   []string            `json:"Entrypoint"`
		Cmd          []string            `json:"Cmd"`
	} `json:"Config"`
}

func inspect(t *testing.T, podman, tag string) imageConfig {
	t.Helper()
	out, err := run(t, podman, "image", "inspect", tag)
	if err != nil {
		t.Fatal(err)
	}
	var cfgs []imageConfig
	if err := json.Unmarshal(out, &cfgs); err != nil || len(cfgs) != 1 {
		t.Fatalf("podman image inspect %s: %v\n%s", tag, err, out)
	}
	return cfgs[0]
}

// unpack exports the image as an OCI layout and unpacks it with umoci; it
// returns the root file system and the runtime process (args, uid, gid)
// umoci derived from the image config.
func unpack(t *testing.T, podman, umoci, tag string) (rootfs string, args []string, uid, gid int) {
	t.Helper()
	dir := t.TempDir()
	layout, bundle := filepath.Join(dir, "layout"), filepath.Join(dir, "bundle")
	if out, err := run(t, podman, "push", "-q", tag, "oci:"+layout+":test"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := run(t, umoci, "unpack", "--image", layout+":test", bundle); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Process struct {
			Args []string `json:"args"`
			User struct {
				UID int `json:"uid"`
				GID int `json:"gid"`
			} `json:"user"`
		} `json:"process"`
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(bundle, "rootfs"), spec.Process.Args, spec.Process.User.UID, spec.Process.User.GID
}

// serveImage runs the image's own command (plus a loopback listen address)
// in its root file system, the fixture host at /host, and scrapes it.
func serveImage(t *testing.T, rootfs string, args []string, uid, gid int) string {
	t.Helper()
	return serveImageOn(t, rootfs, fixtureHost(t), "--bind", args, uid, gid)
}

// serveImageOn serves the image with host bind-mounted read-only at /host;
// bind is "--bind", or "--rbind" to bring the mounts below host along (the
// live root's /sys, /proc and /dev, as a runtime's -v /:/host does).
func serveImageOn(t *testing.T, rootfs, host, bind string, args []string, uid, gid int) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(rootfs, "host"), 0o755); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + freePort(t)
	// unshare -m gives the mounts private propagation; -p -f makes the
	// server PID 1 of its own namespace; --kill-child ends it with unshare.
	script := `mount "$4" "$1" "$2/host" && mount -o remount,bind,ro "$2/host" && exec chroot --userspec="$3" "$2" "${@:5}"`
	cmd := exec.Command("unshare", append([]string{"-m", "-p", "-f", "--kill-child", "--", "bash", "-c", script, "bash",
		host, rootfs, fmt.Sprintf("%d:%d", uid, gid), bind}, append(args, "--web.listen-address="+addr)...)...)
	return serve(t, cmd, addr)
}

// liveSeries are the series of the sources only the running kernel answers
// (and the status saying whether they are asked), from a scrape.
func liveSeries(page string) []string {
	var out []string
	for _, line := range strings.Split(page, "\n") {
		for _, family := range []string{"rdma_host_live_kernel", "rdma_netlink_requests", "rdma_devlink_requests", "rdma_roce_kernel_requests"} {
			if strings.HasPrefix(line, family+"{") || strings.HasPrefix(line, family+" ") {
				out = append(out, line)
			}
		}
	}
	return out
}

// checkLiveInImage: the image run the way it ships (--path.rootfs=/host, the
// machine's root at /host, its own mount and PID namespaces, the host's
// network namespace) asks the running kernel what a run on / asks it: the
// live-kernel request series are the same, and the status says they are on.
// Before --host.live these series were absent in every container.
func checkLiveInImage(t *testing.T, rootfs string, args []string, uid, gid int) {
	t.Helper()
	image := liveSeries(serveImageOn(t, rootfs, "/", "--rbind", args, uid, gid))
	// The same binary on /, as the same user, from a directory that user
	// can reach (t.TempDir is the test user's alone).
	dir, err := os.MkdirTemp("", "rdma_doctor-live")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b, err := os.ReadFile(filepath.Join(rootfs, "bin", "rdma_doctor"))
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "rdma_doctor"), b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + freePort(t)
	direct := liveSeries(serve(t, exec.Command("chroot", fmt.Sprintf("--userspec=%d:%d", uid, gid), "/",
		filepath.Join(dir, "rdma_doctor"), "--web.listen-address="+addr), addr))
	if !slices.Contains(image, `rdma_host_live_kernel{reason="sysfs_same_netns"} 1`) {
		t.Errorf("image on the live root: live-kernel sources not on:\n%s", strings.Join(image, "\n"))
	}
	if len(image) < 2 || !slices.Equal(image, direct) {
		t.Errorf("live-kernel series in the image differ from a run on /:\nimage:\n%s\non /:\n%s", strings.Join(image, "\n"), strings.Join(direct, "\n"))
	}
}

// checkImageConfig checks what the Dockerfiles promise: nobody, port 9873,
// the binary as entrypoint, the host expected at /host.
func checkImageConfig(t *testing.T, c imageConfig, args []string, uid int) {
	t.Helper()
	if c.Config.User != "65534:65534" || uid != 65534 {
		t.Errorf("user %q (uid %d): want 65534:65534, non-root", c.Config.User, uid)
	}
	if _, ok := c.Config.ExposedPorts["9873/tcp"]; !ok || len(c.Config.ExposedPorts) != 1 {
		t.Errorf("exposed ports %v: want 9873/tcp", c.Config.ExposedPorts)
	}
	if !slices.Equal(c.Config.Entrypoint, []string{"/bin/rdma_doctor"}) || !slices.Equal(c.Config.Cmd, []string{"--path.rootfs=/host"}) {
		t.Errorf("entrypoint %v, cmd %v: want /bin/rdma_doctor --path.rootfs=/host", c.Config.Entrypoint, c.Config.Cmd)
	}
	if !slices.Equal(args, []string{"/bin/rdma_doctor", "--path.rootfs=/host"}) {
		t.Errorf("runtime args %v", args)
	}
}

// TestImage builds Dockerfile (FROM scratch: no registry), checks its
// config and serves a fixture host from it.
func TestImage(t *testing.T) {
	podman, umoci := requireImageTools(t)
	tag := "localhost/rdma_doctor-test:" + strconv.Itoa(os.Getpid())
	podmanBuild(t, podman, buildContext(t), "Dockerfile", tag)
	rootfs, args, uid, gid := unpack(t, podman, umoci, tag)
	checkImageConfig(t, inspect(t, podman, tag), args, uid)
	entries, err := os.ReadDir(rootfs)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"LICENSE", "bin"}) {
		t.Errorf("image root holds %v: want only bin/rdma_doctor and LICENSE", names)
	}
	checkServed(t, serveImage(t, rootfs, args, uid, gid))
	checkLiveInImage(t, rootfs, args, uid, gid)
}

// debianCodename is the host's Debian release, the one mmdebstrap makes the
// tools image's base from (through the host's own package mirror setup).
func debianCodename(t *testing.T) string {
	t.Helper()
	f, err := os.Open("/etc/os-release")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VERSION_CODENAME="); ok && v != "" {
			return strings.Trim(v, `"`)
		}
	}
	testenv.SkipOrFail(t, "not a Debian release with a codename: the tools image's base is made with mmdebstrap")
	return ""
}

// TestToolsImage builds Dockerfile.tools on a Debian base made with
// mmdebstrap and imported (no registry pull), checks that sminfo, iblinkinfo
// and perftest run in it, and serves a fixture host from it.
func TestToolsImage(t *testing.T) {
	podman, umoci := requireImageTools(t)
	mmdebstrap := testenv.RequireTool(t, "mmdebstrap", "mmdebstrap not installed (Debian: apt-get install mmdebstrap; .ci/run does)")
	codename := debianCodename(t)
	dir := t.TempDir()
	base := filepath.Join(dir, "base.tar")
	// The apt variant: Essential packages and apt, what a Debian image has.
	if out, err := runFor(t, 8*time.Minute, mmdebstrap, "--variant=apt", "--format=tar", "--quiet", codename, base); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	suffix := strconv.Itoa(os.Getpid())
	baseTag := "localhost/rdma_doctor-test-base:" + suffix
	if out, err := run(t, podman, "import", "-q", base, baseTag); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = run(t, podman, "rmi", "-f", baseTag) })
	tag := "localhost/rdma_doctor-test-tools:" + suffix
	podmanBuild(t, podman, buildContext(t), "Dockerfile.tools", tag, "BASE="+baseTag)
	rootfs, args, uid, gid := unpack(t, podman, umoci, tag)
	checkImageConfig(t, inspect(t, podman, tag), args, uid)

	// The tools the sm and fabric collectors and the probe run, by the
	// names their flags default to, answering in the image's own root
	// (perftest's --version exits 1 after printing it).
	for tool, want := range map[string]string{"sminfo": "sminfo BUILD VERSION", "iblinkinfo": "iblinkinfo BUILD VERSION", "ib_write_bw": "Version:"} {
		out, err := exec.Command("chroot", rootfs, tool, "--version").CombinedOutput()
		if !strings.Contains(string(out), want) {
			t.Errorf("%s --version in the tools image: %v\n%s", tool, err, out)
		}
	}
	checkServed(t, serveImage(t, rootfs, args, uid, gid))
}
