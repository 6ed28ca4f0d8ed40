// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
)

const (
	pkgName    = "rdma-doctor"
	binary     = "rdma_doctor"
	installed  = "/usr/bin/rdma_doctor"
	unitPath   = "/usr/lib/systemd/system/rdma_doctor.service"
	configPath = "/etc/rdma_doctor/rdma_doctor.yml"
	// The unit's flags file (ARGS), a conffile in each package.
	flagsSrc = "deploy/packaging/default/rdma_doctor"
	flagsDeb = "/etc/default/rdma_doctor"
	flagsRpm = "/etc/sysconfig/rdma_doctor"
)

// packaged is one file of the packages: where it installs and its source,
// relative to the repository root ("" for the binary, which make build
// makes), and the one packager that carries it ("" both).
type packaged struct{ dst, src, typ, packager string }

// nfpmContents reads nfpm.yaml's contents with the globs expanded, and its
// scripts.
func nfpmContents(t *testing.T) (files []packaged, scripts []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "nfpm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Contents []struct {
			Src      string `yaml:"src"`
			Dst      string `yaml:"dst"`
			Type     string `yaml:"type"`
			Packager string `yaml:"packager"`
		} `yaml:"contents"`
		Scripts map[string]string `yaml:"scripts"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("nfpm.yaml: %v", err)
	}
	for _, c := range cfg.Contents {
		src := filepath.Clean(c.Src)
		if src == binary {
			files = append(files, packaged{dst: c.Dst, typ: c.Type, packager: c.Packager})
			continue
		}
		matches, err := filepath.Glob(filepath.Join("..", src))
		if err != nil || len(matches) == 0 {
			t.Fatalf("nfpm.yaml: %s matches nothing", c.Src)
		}
		for _, m := range matches {
			rel, _ := filepath.Rel("..", m)
			dst := c.Dst
			if strings.HasSuffix(dst, "/") {
				dst += filepath.Base(m)
			}
			files = append(files, packaged{dst: dst, src: rel, typ: c.Type, packager: c.Packager})
		}
	}
	for _, s := range cfg.Scripts {
		scripts = append(scripts, filepath.Clean(s))
	}
	return files, scripts
}

// tarballFiles is what promu puts in the release archive: each
// .promu.yml tarball entry copied (cp -a) into the top directory, and the
// binary. Keys are paths in the archive, values sources ("" the binary).
func tarballFiles(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", ".promu.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Tarball struct {
			Files []string `yaml:"files"`
		} `yaml:"tarball"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf(".promu.yml: %v", err)
	}
	out := map[string]string{binary: ""}
	for _, f := range cfg.Tarball.Files {
		root := filepath.Join("..", f)
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			in, _ := filepath.Rel(filepath.Dir(root), p)
			src, _ := filepath.Rel("..", p)
			out[in] = src
			return nil
		})
		if err != nil {
			t.Fatalf(".promu.yml: %s: %v", f, err)
		}
	}
	return out
}

// TestPackagesMatchTarball checks that the packages and the release archive
// carry the same files (by content, and by name), and what the packages
// promise: the binary, the unit, the config as a conffile that parses, the
// rules and dashboards under /usr/share/rdma_doctor.
func TestPackagesMatchTarball(t *testing.T) {
	files, scripts := nfpmContents(t)
	for _, s := range scripts {
		if st, err := os.Stat(filepath.Join("..", s)); err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("script %s: %v, want an executable file", s, err)
		}
	}
	content := func(src string) string {
		if src == "" {
			return "the binary"
		}
		b, err := os.ReadFile(filepath.Join("..", src))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	inPackage := map[string]string{} // content -> base name
	dsts := map[string]packaged{}
	for _, f := range files {
		inPackage[content(f.src)] = filepath.Base(f.dst)
		dsts[f.dst] = f
	}
	inTarball := map[string]string{}
	for in, src := range tarballFiles(t) {
		inTarball[content(src)] = filepath.Base(in)
	}
	for c, name := range inTarball {
		if got, ok := inPackage[c]; !ok || got != name {
			t.Errorf("the tarball's %s is not in the packages under that name (%q)", name, got)
		}
	}
	for c, name := range inPackage {
		if _, ok := inTarball[c]; !ok {
			t.Errorf("the packages' %s is not in the tarball", name)
		}
	}

	if f, ok := dsts[installed]; !ok || f.src != "" {
		t.Errorf("no binary at %s", installed)
	}
	if f := dsts[unitPath]; f.src != filepath.Join("deploy", "systemd", "rdma_doctor.service") {
		t.Errorf("%s from %q, want the unit in deploy/systemd", unitPath, f.src)
	}
	cf := dsts[configPath]
	if cf.typ != "config|noreplace" {
		t.Errorf("%s has type %q, want a conffile (config|noreplace)", configPath, cf.typ)
	}
	if _, err := config.Parse([]byte(content(cf.src))); cf.src == "" || err != nil {
		t.Errorf("the packaged config %s does not parse: %v", cf.src, err)
	}
	unit := content(dsts[unitPath].src)
	if !strings.Contains(unit, "\nExecStart="+installed+" --config.file="+configPath+" $ARGS\n") {
		t.Errorf("the unit does not run %s with %s and $ARGS", installed, configPath)
	}
	// The flags file: a conffile in each package, read by the unit, and
	// one that defines ARGS as the unit expands it.
	for packager, dst := range map[string]string{"deb": flagsDeb, "rpm": flagsRpm} {
		f := dsts[dst]
		if f.src != flagsSrc || f.typ != "config|noreplace" || f.packager != packager {
			t.Errorf("%s: %+v, want %s as a conffile of the .%s only", dst, f, flagsSrc, packager)
		}
		if !strings.Contains(unit, "\nEnvironmentFile=-"+dst+"\n") {
			t.Errorf("the unit does not read %s (EnvironmentFile=-%s)", dst, dst)
		}
	}
	if out, err := exec.Command("sh", "-c", `set -u; . "$1"; printf %s "${ARGS+set}"`, "sh", filepath.Join("..", flagsSrc)).CombinedOutput(); err != nil || string(out) != "set" {
		t.Errorf("%s does not define ARGS: %q %v", flagsSrc, out, err)
	}
	// What the docs tell users to merge or install: the Alertmanager
	// configuration and inhibit rules (docs/monitoring.md), the NHC check
	// (docs/diagnose.md).
	for _, want := range []string{"/usr/share/rdma_doctor/rdma_doctor.rules.yml", "/usr/share/rdma_doctor/alertmanager.yml", "/usr/share/rdma_doctor/inhibit_rules.yml", "/usr/share/rdma_doctor/rdma_doctor.nhc", "/usr/share/rdma_doctor/dashboards/fleet.json"} {
		if _, ok := dsts[want]; !ok {
			t.Errorf("the packages lack %s", want)
		}
	}
}

// buildPackage builds the deb or rpm with the real nfpm from a staging copy
// of its sources and a freshly built binary (nfpm reads ./rdma_doctor,
// make build's output, which the test does not write into the tree).
func buildPackage(t *testing.T, packager string) string {
	t.Helper()
	testenv.Long(t, "builds a "+packager+" package with nfpm")
	nfpm := testenv.RequireTool(t, "nfpm", "nfpm not installed (make tools installs the pinned one; .ci/run does)")
	files, scripts := nfpmContents(t)
	stage := t.TempDir()
	cp := func(rel string) {
		b, err := os.ReadFile(filepath.Join("..", rel))
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(filepath.Join("..", rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(stage, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(stage, rel), b, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	cp("nfpm.yaml")
	for _, f := range files {
		if f.src != "" {
			cp(f.src)
		}
	}
	for _, s := range scripts {
		cp(s)
	}
	buildStatic(t, stage, binary)
	out := filepath.Join(stage, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nfpm, "package", "--config", "nfpm.yaml", "--packager", packager, "--target", out+"/")
	cmd.Dir = stage
	cmd.Env = append(os.Environ(), "VERSION="+version(t), "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nfpm: %v\n%s", err, b)
	}
	pkgs, _ := filepath.Glob(filepath.Join(out, "*."+packager))
	if len(pkgs) != 1 {
		t.Fatalf("nfpm made %v, want one .%s", pkgs, packager)
	}
	return pkgs[0]
}

func lines(b []byte) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// packagedDsts are nfpm.yaml's installed paths in the packager's package,
// sorted; conffiles only those that are config files.
func packagedDsts(t *testing.T, packager string, conffiles bool) []string {
	t.Helper()
	files, _ := nfpmContents(t)
	var out []string
	for _, f := range files {
		if (f.packager == "" || f.packager == packager) && (!conffiles || strings.HasPrefix(f.typ, "config")) {
			out = append(out, f.dst)
		}
	}
	slices.Sort(out)
	return out
}

// TestDebPackage builds the .deb, installs it with dpkg -i, verifies the
// installed unit with systemd-analyze, serves a fixture host with the
// installed binary and config, then removes and purges it and checks
// nothing is left.
func TestDebPackage(t *testing.T) {
	requireRoot(t)
	dpkg := testenv.RequireTool(t, "dpkg", "dpkg not installed (a Debian host)")
	analyze := requireTool(t, "systemd-analyze")
	if out, err := exec.Command("dpkg-query", "-W", "-f", "${Status}", pkgName).CombinedOutput(); err == nil && strings.Contains(string(out), "installed") {
		t.Fatalf("%s is already installed here (%s): this test installs and removes it", pkgName, out)
	}
	deb := buildPackage(t, "deb")

	fields, err := run(t, "dpkg-deb", "--field", deb, "Package", "Version", "Architecture")
	if err != nil {
		t.Fatal(err)
	}
	if want := "Package: " + pkgName + "\nVersion: " + version(t) + "\n"; !bytes.HasPrefix(fields, []byte(want)) {
		t.Errorf("control fields:\n%s\nwant %q first", fields, want)
	}
	conffiles, err := run(t, "sh", "-c", `dpkg-deb --ctrl-tarfile "$1" | tar -xO ./conffiles`, "sh", deb)
	if want := packagedDsts(t, "deb", true); err != nil || !slices.Equal(lines(conffiles), want) {
		t.Errorf("conffiles %q (%v): want %s", conffiles, err, want)
	}

	if out, err := run(t, dpkg, "-i", deb); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = run(t, dpkg, "--purge", pkgName) })
	listed, err := run(t, "dpkg-query", "-L", pkgName)
	if err != nil {
		t.Fatal(err)
	}
	for _, dst := range packagedDsts(t, "deb", false) {
		if !slices.Contains(lines(listed), dst) {
			t.Errorf("dpkg -L lacks %s", dst)
		}
		if _, err := os.Stat(dst); err != nil {
			t.Errorf("installed file: %v", err)
		}
	}

	// The installed unit, with the installed binary: any warning fails.
	if out, err := exec.Command(analyze, "verify", unitPath).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unitPath, err, out)
	}

	addr := "127.0.0.1:" + freePort(t)
	checkServed(t, serve(t, exec.Command(installed, "--path.rootfs="+fixtureHost(t), "--config.file="+configPath, "--web.listen-address="+addr), addr))

	// Remove keeps the changed-or-not conffile, purge takes it.
	if out, err := run(t, dpkg, "--remove", pkgName); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, gone := range []string{installed, unitPath, "/usr/share/rdma_doctor"} {
		if _, err := os.Stat(gone); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after dpkg --remove, %s: %v, want it gone", gone, err)
		}
	}
	for _, kept := range []string{configPath, flagsDeb} {
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("after dpkg --remove the conffile should stay: %v", err)
		}
	}
	if out, err := run(t, dpkg, "--purge", pkgName); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, gone := range []string{configPath, filepath.Dir(configPath), flagsDeb} {
		if _, err := os.Stat(gone); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after dpkg --purge, %s: %v, want it gone", gone, err)
		}
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f", "${Status}", pkgName).CombinedOutput(); err == nil && strings.Contains(string(out), " installed") {
		t.Errorf("after purge dpkg still knows %s: %s", pkgName, out)
	}
}

// TestRpmPackage builds the .rpm and reads it back with rpm: its name,
// version, files (the same as the .deb's) and config file. This Debian CI
// does not install it.
func TestRpmPackage(t *testing.T) {
	rpm := testenv.RequireTool(t, "rpm", "rpm not installed (Debian: apt-get install rpm; .ci/run does)")
	pkg := buildPackage(t, "rpm")
	if out, err := run(t, rpm, "-qp", "--qf", "%{NAME} %{VERSION}", pkg); err != nil || string(out) != pkgName+" "+version(t) {
		t.Errorf("rpm -qp: %q %v, want %s %s", out, err, pkgName, version(t))
	}
	list, err := run(t, rpm, "-qlp", pkg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := lines(list), packagedDsts(t, "rpm", false); !slices.Equal(got, want) {
		t.Errorf("rpm files %v, want %v", got, want)
	}
	if cf, err := run(t, rpm, "-qcp", pkg); err != nil || !slices.Equal(lines(cf), packagedDsts(t, "rpm", true)) {
		t.Errorf("rpm config files %q (%v), want %s", cf, err, packagedDsts(t, "rpm", true))
	}
}
