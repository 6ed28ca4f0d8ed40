// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Command slowfs serves a host tree (a fixture host) read-only over FUSE
// with a delay per read that stands for what a real mlx5 host's sysfs costs:
// a counters/ read is a MAD to the firmware, a hw_counters/ directory is
// refreshed from the firmware at most once per lifespan, every other
// attribute is a cheap show(). The side-by-side benchmark runs both
// exporters on it; hang tests can make reads of chosen paths block until
// released.
//
//	slowfs -tree fixtures/hosts/dgx-h100 -mount /tmp/slow \
//	    [-counter-delay 50us] [-hw-refresh-delay 1ms] [-hw-window 10ms] [-other-delay 5us] \
//	    [-block 'sys/devices/*/*/*/infiniband/mlx5_0/ports/1/counters/*']...
//
// A blocked read waits until slowfs gets SIGUSR1 (release: the waiting
// reads and every later one go through); SIGUSR2 blocks again. SIGINT or
// SIGTERM unmounts and exits. It needs root and /dev/fuse (it calls
// mount(2) itself; no fusermount).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// patterns is a repeatable flag.
type patterns []string

func (p *patterns) String() string     { return strings.Join(*p, ",") }
func (p *patterns) Set(v string) error { *p = append(*p, v); return nil }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "slowfs:", err)
		os.Exit(1)
	}
}

func run() error {
	d := DefaultDelays
	tree := flag.String("tree", "", "host tree to serve (required)")
	mnt := flag.String("mount", "", "mount point, an existing directory (required)")
	flag.DurationVar(&d.Counter, "counter-delay", d.Counter, "delay of each counters/ (and counters_ext/) file read")
	flag.DurationVar(&d.HWRefresh, "hw-refresh-delay", d.HWRefresh, "delay of a hw_counters/ directory refresh")
	flag.DurationVar(&d.HWWindow, "hw-window", d.HWWindow, "a hw_counters/ refresh serves the directory's reads for this long (the kernel's lifespan)")
	flag.DurationVar(&d.Other, "other-delay", d.Other, "delay of any other file read")
	var block patterns
	flag.Var(&block, "block", "path.Match pattern, relative to the tree, whose reads block until SIGUSR1 (repeatable)")
	flag.Parse()
	if *tree == "" || *mnt == "" {
		return fmt.Errorf("-tree and -mount are required")
	}
	srv, err := NewServer(d, block)
	if err != nil {
		return err
	}
	fsrv, err := Mount(*tree, *mnt, srv)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "slowfs: serving %s on %s (counters %v, hw_counters refresh %v per %v, other %v, %d blocked patterns)\n",
		*tree, *mnt, d.Counter, d.HWRefresh, d.HWWindow, d.Other, len(block))
	go handleSignals(srv, func() {
		// Blocked readers would keep the mount busy.
		srv.Release()
		if err := fsrv.Unmount(); err != nil {
			// A reader still holds a file open: detach, the kernel
			// finishes the unmount when it lets go.
			fmt.Fprintln(os.Stderr, "slowfs: unmount:", err, "(detaching)")
			if err := syscall.Unmount(*mnt, syscall.MNT_DETACH); err != nil {
				fmt.Fprintln(os.Stderr, "slowfs: detach:", err)
			}
			// Wait returns only when the last reader lets go.
			os.Exit(1)
		}
	})
	fsrv.Wait()
	return nil
}

// handleSignals releases and re-blocks the gate, and unmounts on SIGINT or
// SIGTERM (Wait then returns).
func handleSignals(srv *Server, unmount func()) {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGINT, syscall.SIGTERM)
	for sig := range ch {
		switch sig {
		case syscall.SIGUSR1:
			srv.Release()
		case syscall.SIGUSR2:
			srv.Block()
		default:
			unmount()
			return
		}
	}
}
