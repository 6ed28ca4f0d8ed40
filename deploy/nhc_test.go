// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
)

// nhcScript is the shipped NHC check (nfpm.yaml installs it as
// /usr/share/rdma_doctor/rdma_doctor.nhc).
const nhcScript = "nhc/rdma_doctor.nhc"

// nhcShim stands in for NHC (not packaged in Debian: no lbnl-nhc or nhc in
// apt): it defines NHC's die and log as the check scripts call them, each
// writing one line to stdout, sources the check as NHC sources
// /etc/nhc/scripts/*.nhc, and runs the check the way an nhc.conf line does.
// NHC's die ends the run with its code; so does the shim's.
const nhcShim = `
function die() { echo "DIE $1 $2"; exit "$1"; }
function log() { echo "LOG $*"; }
source "$NHC_CHECK"
check_rdma_doctor "$@"
echo "RETURN $?"
`

// TestNHCCheck runs the shipped NHC check with bash against the built
// binary on fixture hosts: a failing host drains (die with diagnose's line
// as the reason), a warning is logged, a clean host is left alone, and a
// diagnose that cannot run (exit 3, a missing binary, a hung one) is logged
// and never drains.
func TestNHCCheck(t *testing.T) {
	bash := testenv.RequireTool(t, "bash", "bash not installed")
	testenv.RequireTool(t, "timeout", "coreutils' timeout not installed")
	script, err := filepath.Abs(nhcScript)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := buildStatic(t, dir, binary)
	hung := filepath.Join(dir, "hung")
	if err := os.WriteFile(hung, []byte("#!/bin/sh\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	host := func(name string) []string {
		root, err := filepath.Abs(filepath.Join("..", "fixtures", "hosts", name))
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"--path.rootfs=" + root}
		if cfg := filepath.Join(root, "etc", "rdma_doctor", "rdma_doctor.yml"); fileExists(cfg) {
			args = append(args, "--config.file="+cfg)
		}
		return args
	}
	for _, tc := range []struct {
		name string
		args []string
		want *regexp.Regexp // the shim's whole output
	}{
		{"fail drains", host("cx6-hdr-fdr"),
			regexp.MustCompile(`^DIE 1 rdma_doctor: FAIL port\.rate mlx5_0/1 56 Gb/sec \(4X FDR\), expected 200 Gb/sec \(config_board_id\) \(\+\d+ more\)\n$`)},
		{"warn is logged", host("hgx-h100"),
			regexp.MustCompile(`^LOG check_rdma_doctor: rdma_doctor: WARN ctr\.downed mlx5_1/1 link_downed unknown \(saturated\)[^\n]*\nRETURN 0\n$`)},
		{"clean host", host("roce-cx6dx"),
			regexp.MustCompile(`^RETURN 0\n$`)},
		{"could not run: no sysfs", []string{"--path.rootfs=/nonexistent/rdma"},
			regexp.MustCompile(`^LOG check_rdma_doctor: could not run \(exit 3\): [^\n]*path\.rootfs[^\n]*; host left alone\nRETURN 0\n$`)},
		{"could not run: bad flag", append(host("cx6-hdr-fdr"), "--bogus"),
			regexp.MustCompile(`^LOG check_rdma_doctor: could not run \(exit 3\): [^\n]*bogus[^\n]*; host left alone\nRETURN 0\n$`)},
		{"could not run: no binary", []string{"-p", filepath.Join(dir, "missing")},
			regexp.MustCompile(`^LOG check_rdma_doctor: could not run \(exit 127\): [^\n]*missing[^\n]*; host left alone\nRETURN 0\n$`)},
		{"could not run: hung", []string{"-t", "1", "-p", hung},
			regexp.MustCompile(`^LOG check_rdma_doctor: could not run: no verdict within 1s; host left alone\nRETURN 0\n$`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if !slicesHasPrefix(args, "-p") && !slicesHasPrefix(args, "-t") {
				args = append([]string{"-t", "120", "-p", bin}, args...)
			}
			cmd := exec.Command(bash, append([]string{"-c", nhcShim, "nhc"}, args...)...)
			cmd.Env = append(os.Environ(), "NHC_CHECK="+script)
			out, err := cmd.Output()
			if exit := (*exec.ExitError)(nil); err != nil && !errors.As(err, &exit) {
				t.Fatal(err)
			}
			if !tc.want.Match(out) {
				t.Errorf("check_rdma_doctor %s:\n%s\nwant %s", strings.Join(args, " "), out, tc.want)
			}
			// A drain reason goes into Slurm's node reason: one line, no
			// double quotes.
			if strings.HasPrefix(string(out), "DIE") && strings.ContainsAny(strings.TrimSuffix(string(out), "\n"), "\"\n") {
				t.Errorf("drain reason %q: want one line without double quotes", out)
			}
		})
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func slicesHasPrefix(args []string, flag string) bool {
	return len(args) > 0 && args[0] == flag
}
