// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"os"
	"strings"

	"github.com/alecthomas/kingpin/v2"
	"golang.org/x/sys/unix"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/remediate"
)

func setupRemediate(cmd *kingpin.CmdClause) func(context.Context, *App) int {
	c := &remediate.Command{}
	cmd.Arg("mode", "plan (default), apply or rollback.").Default("plan").EnumVar(&c.Mode, "plan", "apply", "rollback")
	cmd.Flag("only", "Only these action ids (comma-separated or repeated): "+strings.Join(remediate.ActionIDs(), ", ")+".").PlaceHolder("ID").StringsVar(&c.Only)
	cmd.Flag("format", "Plan output format: text or json.").Default("text").EnumVar(&c.Format, "text", "json")
	cmd.Flag("yes", "Apply without asking.").BoolVar(&c.Yes)
	cmd.Flag("force", "rollback: restore the entries that can be read whole from a damaged journal (empty, cut short, data after its end, no entries), then remove it.").BoolVar(&c.Force)
	return func(ctx context.Context, a *App) int {
		w := remediate.DirWriter{Roots: remediate.Roots{Root: a.Paths.Rootfs, Sys: a.Paths.Sysfs, Proc: a.Paths.Procfs}}
		var counters remediate.Counters
		if k := a.Host.Options().Kernel; k != nil {
			// Only where the tree is the running kernel's /sys: the
			// optional counters live in the kernel, not in files.
			counters = remediate.KernelCounters{Conn: k}
			w.Counters = counters
		}
		c.Root = os.Geteuid() == 0
		c.Stdin, c.StdinTerminal, c.Stdout, c.Stderr = os.Stdin, isTerminal(os.Stdin), os.Stdout, os.Stderr
		code, err := c.Run(w, func() *remediate.Input {
			reader := &diagnose.Reader{Host: a.Host, ExpectedDevices: a.Config.Diagnose.ExpectedDevices}
			return &remediate.Input{Snap: reader.Read(ctx), Config: a.Config, W: w, Counters: counters}
		})
		if err != nil {
			errorf(os.Stderr, "%v", err)
		}
		return code
	}
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
