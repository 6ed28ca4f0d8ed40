// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package subprocess

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Reaper finds and kills what a run left behind outside its process group.
// A child that calls setsid or setpgid leaves the group, so the group
// kill misses it, and once its parent exits it is re-parented to init,
// where nothing ties it to the run any more. NewReaper makes this process
// a child subreaper (prctl PR_SET_CHILD_SUBREAPER) instead: every orphan
// of every run becomes our child, which it cannot escape (a double fork
// or a new session does not help), and a child of ours keeps its pid
// until we reap it, so signalling it can never hit a stranger.
//
// Why not a cgroup per run: the cgroup file system is read-only in most
// containers and v1 on older hosts, so that would need this as the
// fallback anyway.
//
// The contract: in a process with a Reaper, every program is started
// through it (Spec.Reaper, Reaper.Start). A child that was not is taken
// for an orphan and killed. A nil *Reaper does nothing: orphans go to
// init.
//
// When a run ends the Reaper reads /proc/<pid>/stat of every process (a
// few thousand small reads on a busy host, bounded by the pid space) and
// kills each child of ours it did not start, with what descends from it,
// when it is certainly no running run's: it is a zombie, it started
// before every run still running (a run's descendants cannot be older
// than its leader), it is in the ended run's process group, or it holds
// the ended run's output pipe. An orphan that fits none of these (it left
// the group and its output while another run was already running) is
// left to the sweep of the last run that could own it. The sweep waits a
// bounded time for what it killed to die (a process stuck in the kernel
// cannot), and the next sweep reaps what is left.
type Reaper struct {
	self int
	proc string // our own /proc, not the observed host's --path.procfs

	mu sync.Mutex
	// runs are the leaders started through the Reaper and not reaped yet.
	runs map[int]*leader
}

type leader struct {
	// start is the leader's start time in clock ticks since boot (0 when
	// unreadable: then no orphan counts as older than it).
	start uint64
	// exited is set once the leader has exited: it no longer holds back
	// the sweep, but it is still os/exec's to reap.
	exited bool
}

// Limits of one sweep: passes over /proc (each kills one generation of
// what an orphan forked) and the wait for killed processes to die.
const (
	sweepPasses = 8
	sweepWait   = time.Second
	// fdScan bounds the descriptors looked at to tell whether a process
	// holds a run's output pipe.
	fdScan = 1024
)

// NewReaper makes this process the child subreaper of its descendants.
// Call it once, where a long-running command (serve) starts, and pass
// the Reaper to every runner.
func NewReaper() (*Reaper, error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("prctl PR_SET_CHILD_SUBREAPER: %w", err)
	}
	return &Reaper{self: os.Getpid(), proc: "/proc", runs: map[int]*leader{}}, nil
}

// Start starts cmd and registers its process as a run's leader, so that
// no sweep takes it for an orphan. Whoever calls Start waits for cmd and
// then calls Finish.
func (r *Reaper) Start(cmd *exec.Cmd) error {
	if r == nil {
		return cmd.Start()
	}
	// Held across the fork: a sweep must not see the new child before it
	// is registered.
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	l := &leader{}
	if p, err := r.stat(cmd.Process.Pid); err == nil {
		l.start = p.start
	}
	r.runs[cmd.Process.Pid] = l
	return nil
}

// Finish is called once the leader pid, started by Start, has been reaped
// (cmd.Wait returned) and its process group killed: it forgets the
// leader and kills what the run left behind.
func (r *Reaper) Finish(pid int) {
	if r == nil {
		return
	}
	r.forget(pid)
	r.sweep(ending{pgid: pid})
}

// exited marks the leader pid as exited and not yet reaped.
func (r *Reaper) exited(pid int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.runs[pid]; l != nil {
		l.exited = true
	}
}

func (r *Reaper) forget(pid int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.runs, pid)
}

// ending is the run whose end a sweep follows: its process group and the
// pipe its standard output went to (0: none known).
type ending struct {
	pgid int
	pipe uint64
}

// procInfo is what a sweep needs of one process's stat line.
type procInfo struct {
	pid, ppid, pgid int
	start           uint64
	zombie          bool
}

// identity is a process across passes: a pid with its start time, which
// a reused pid does not have.
type identity struct {
	pid   int
	start uint64
}

// sweep kills and reaps the orphans of ended runs; it returns how many it
// killed or reaped.
func (r *Reaper) sweep(end ending) int {
	if r == nil {
		return 0
	}
	n := 0
	// doomed are the descendants of what a pass killed: the next pass
	// finds them re-parented to us and kills them in turn.
	doomed := map[identity]bool{}
	deadline := time.Now().Add(sweepWait)
	for pass := 0; pass < sweepPasses; pass++ {
		victims := r.victims(end, doomed)
		if len(victims) == 0 {
			break
		}
		for _, v := range victims {
			if !v.zombie {
				_ = syscall.Kill(v.pid, syscall.SIGKILL)
			}
		}
		n += len(victims)
		if !r.reap(victims, deadline) {
			break // one is stuck dying: the next sweep reaps it
		}
	}
	return n
}

// victims lists the children of ours to kill now, and adds the
// descendants of each to doomed.
func (r *Reaper) victims(end ending, doomed map[identity]bool) []procInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	procs := r.scan()
	oldest := uint64(math.MaxUint64)
	for _, l := range r.runs {
		if !l.exited {
			oldest = min(oldest, l.start)
		}
	}
	var out []procInfo
	for _, p := range procs {
		if p.ppid != r.self || r.runs[p.pid] != nil {
			continue
		}
		if p.zombie || doomed[identity{p.pid, p.start}] || p.start < oldest ||
			(end.pgid != 0 && p.pgid == end.pgid) || (end.pipe != 0 && r.holds(p.pid, end.pipe)) {
			out = append(out, p)
		}
	}
	if len(out) > 0 {
		children := map[int][]procInfo{}
		for _, p := range procs {
			children[p.ppid] = append(children[p.ppid], p)
		}
		var mark func(pid, depth int)
		mark = func(pid, depth int) {
			for _, c := range children[pid] {
				if id := (identity{c.pid, c.start}); !doomed[id] && depth < 64 {
					doomed[id] = true
					mark(c.pid, depth+1)
				}
			}
		}
		for _, v := range out {
			mark(v.pid, 0)
		}
	}
	return out
}

// reap waits for each victim to be gone, until deadline; false if one
// was not.
func (r *Reaper) reap(victims []procInfo, deadline time.Time) bool {
	for _, v := range victims {
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(v.pid, &ws, unix.WNOHANG, nil)
			if pid == v.pid || (err != nil && !errors.Is(err, unix.EINTR)) {
				break // reaped, or not ours any more (ECHILD)
			}
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(time.Millisecond)
		}
	}
	return true
}

// scan reads every process's stat line; one that vanished or cannot be
// read is left out.
func (r *Reaper) scan() []procInfo {
	d, err := os.Open(r.proc)
	if err != nil {
		return nil
	}
	defer d.Close()
	var out []procInfo
	for {
		names, err := d.Readdirnames(512)
		for _, name := range names {
			pid, perr := strconv.Atoi(name)
			if perr != nil {
				continue
			}
			if p, serr := r.stat(pid); serr == nil {
				out = append(out, p)
			}
		}
		if err != nil {
			return out
		}
	}
}

// stat reads /proc/<pid>/stat: one line of a few hundred bytes. Raw
// system calls: a sweep reads one per process on the host.
func (r *Reaper) stat(pid int) (procInfo, error) {
	fd, err := unix.Open(r.proc+"/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return procInfo{}, err
	}
	defer unix.Close(fd)
	var buf [1024]byte
	n, err := unix.Read(fd, buf[:])
	if err != nil {
		return procInfo{}, err
	}
	return parseStat(pid, buf[:max(n, 0)])
}

// parseStat parses the fields of a stat line a sweep uses. The command
// name, in parentheses, may hold spaces and parentheses itself: the
// fields start after the last ')'.
func parseStat(pid int, b []byte) (procInfo, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	// Fields from 3 on: state ppid pgrp session tty_nr tpgid flags minflt
	// cminflt majflt cmajflt utime stime cutime cstime priority nice
	// num_threads itrealvalue starttime.
	var f [20][]byte
	n := 0
	for rest := b[i+1:]; n < len(f); n++ {
		rest = bytes.TrimLeft(rest, " \n")
		if len(rest) == 0 {
			break
		}
		end := bytes.IndexAny(rest, " \n")
		if end < 0 {
			end = len(rest)
		}
		f[n], rest = rest[:end], rest[end:]
	}
	if n < len(f) {
		return procInfo{}, fmt.Errorf("/proc/%d/stat: %d fields after the command name, want 20 or more", pid, n)
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgid, err2 := strconv.Atoi(string(f[2]))
	start, err3 := strconv.ParseUint(string(f[19]), 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return procInfo{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return procInfo{pid: pid, ppid: ppid, pgid: pgid, start: start, zombie: len(f[0]) == 1 && f[0][0] == 'Z'}, nil
}

// holds reports whether pid has the pipe of inode ino open.
func (r *Reaper) holds(pid int, ino uint64) bool {
	dir := r.proc + "/" + strconv.Itoa(pid) + "/fd"
	d, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer d.Close()
	names, _ := d.Readdirnames(fdScan)
	want := "pipe:[" + strconv.FormatUint(ino, 10) + "]"
	for _, name := range names {
		if l, err := os.Readlink(dir + "/" + name); err == nil && l == want {
			return true
		}
	}
	return false
}

// pipeInode is the inode of the pipe f is an end of (0 if unknown).
func pipeInode(f *os.File) uint64 {
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
