// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"path"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Delays is how long a read waits before it is served, by file kind. On a
// real mlx5 host a counters/ read is a MAD to the firmware, and a read in
// hw_counters/ refreshes the whole directory from the firmware unless the
// last refresh is younger than the kernel's lifespan (hw_counters/lifespan,
// 10 ms by default); every other attribute is a cheap show() call.
type Delays struct {
	Counter   time.Duration // each file in a counters/ or counters_ext/ directory
	HWRefresh time.Duration // one hw_counters/ directory refresh
	HWWindow  time.Duration // a refresh serves the directory's reads for this long
	Other     time.Duration // any other file
}

// DefaultDelays are the figures issue 13 asks for.
var DefaultDelays = Delays{Counter: 50 * time.Microsecond, HWRefresh: time.Millisecond, HWWindow: 10 * time.Millisecond, Other: 5 * time.Microsecond}

// kind of a file, by the directory it is in.
type kind int

const (
	kindOther kind = iota
	kindCounter
	kindHW
)

func kindOf(rel string) kind {
	switch path.Base(path.Dir(rel)) {
	case "counters", "counters_ext":
		return kindCounter
	case "hw_counters":
		return kindHW
	}
	return kindOther
}

// Server is the state the mounted nodes share: the delays, the hw_counters
// refresh clocks and the gate that blocked reads wait on.
type Server struct {
	delays Delays
	block  []string // path.Match patterns, relative to the tree root

	hwMu sync.Mutex
	hw   map[string]*hwDir

	gateMu  sync.Mutex
	gate    chan struct{} // closed while released
	waiting int           // reads waiting on the gate now
}

// hwDir is one hw_counters/ directory's refresh clock. Its mutex is held
// through the refresh delay, as the kernel holds the stats lock through the
// firmware query: concurrent readers of the directory wait for it.
type hwDir struct {
	mu   sync.Mutex
	last time.Time
}

// NewServer returns a server with the given delays whose reads of a path
// matching one of block wait until Release.
func NewServer(d Delays, block []string) (*Server, error) {
	for _, p := range block {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("block pattern %q: %w", p, err)
		}
	}
	return &Server{delays: d, block: block, hw: map[string]*hwDir{}, gate: make(chan struct{})}, nil
}

// Release lets every blocked read through, those waiting now and later ones.
func (s *Server) Release() {
	s.gateMu.Lock()
	defer s.gateMu.Unlock()
	select {
	case <-s.gate:
	default:
		close(s.gate)
	}
}

// Block makes reads of the blocked paths wait again (after a Release).
func (s *Server) Block() {
	s.gateMu.Lock()
	defer s.gateMu.Unlock()
	select {
	case <-s.gate:
		s.gate = make(chan struct{})
	default:
	}
}

// Waiting is how many reads wait on the gate now (for tests and logs).
func (s *Server) Waiting() int {
	s.gateMu.Lock()
	defer s.gateMu.Unlock()
	return s.waiting
}

func (s *Server) blocked(rel string) bool {
	for _, p := range s.block {
		if ok, _ := path.Match(p, rel); ok {
			return true
		}
	}
	return false
}

// wait blocks until the gate is released or the reader gives up (the kernel
// sends an INTERRUPT when the reading process gets a signal).
func (s *Server) wait(ctx context.Context) syscall.Errno {
	s.gateMu.Lock()
	gate := s.gate
	s.waiting++
	s.gateMu.Unlock()
	defer func() {
		s.gateMu.Lock()
		s.waiting--
		s.gateMu.Unlock()
	}()
	select {
	case <-gate:
		return 0
	case <-ctx.Done():
		return syscall.EINTR
	}
}

// delay holds a read of rel. A counters/ or hw_counters/ read sleeps: the
// firmware round trip it stands for costs the host no CPU. Any other
// attribute spins: its show() is CPU work in the kernel, and a sleep of a
// few microseconds would last the scheduler's wake-up latency instead
// (about 50 µs on a loaded 2-core VM).
func (s *Server) delay(rel string) {
	switch kindOf(rel) {
	case kindCounter:
		sleep(s.delays.Counter)
	case kindHW:
		s.refreshHW(path.Dir(rel))
	default:
		spin(s.delays.Other)
	}
}

func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// sleep blocks the calling thread in nanosleep(2) for at least d. Not
// time.Sleep: when the Go scheduler is idle its timers wake from
// epoll_pwait, whose timeout is in milliseconds, so a 50 µs time.Sleep
// lasts about 1 ms. The thread's timer slack (50 µs by default) is set to
// 1 ns first, or every sleep would be stretched by it.
func sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	ts := unix.NsecToTimespec(d.Nanoseconds())
	for {
		var rem unix.Timespec
		err := unix.Nanosleep(&ts, &rem)
		if err != unix.EINTR {
			return
		}
		ts = rem
	}
}

func (s *Server) refreshHW(dir string) {
	s.hwMu.Lock()
	d := s.hw[dir]
	if d == nil {
		d = &hwDir{}
		s.hw[dir] = d
	}
	s.hwMu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.last.IsZero() && time.Since(d.last) < s.delays.HWWindow {
		return
	}
	sleep(s.delays.HWRefresh)
	d.last = time.Now()
}

// node is a loopback node whose files are read-only and read slowly.
type node struct {
	*fs.LoopbackNode
	srv *Server
}

var (
	_ fs.NodeWrapChilder = (*node)(nil)
	_ fs.NodeOpener      = (*node)(nil)
	_ fs.NodeFlusher     = (*node)(nil)
)

// Flush answers ENOSYS, which tells the kernel never to send FLUSH on
// close again: a read-only file has nothing to flush, and a round trip per
// close would be FUSE's cost, not the one slowfs stands for.
func (n *node) Flush(context.Context, fs.FileHandle) syscall.Errno { return syscall.ENOSYS }

// WrapChild makes every node the loopback creates below the root a node.
func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	lb, ok := ops.(*fs.LoopbackNode)
	if !ok {
		return ops
	}
	return &node{LoopbackNode: lb, srv: n.srv}
}

// Open refuses writes (the tree is a fixture, served read-only) and asks
// for direct I/O so that every read reaches the server, as every read of a
// sysfs attribute reaches the driver: there is no page cache for either.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0 {
		return nil, 0, syscall.EROFS
	}
	rel := n.Path(nil)
	fd, err := syscall.Open(path.Join(n.RootData.Path, rel), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, fs.ToErrno(err)
	}
	f := &file{LoopbackFile: fs.NewLoopbackFileFromOS(os.NewFile(uintptr(fd), rel)), srv: n.srv, rel: rel, blocked: n.srv.blocked(rel)}
	return f, fuse.FOPEN_DIRECT_IO, 0
}

// file delays the read at offset 0 (where sysfs calls the attribute's
// show(); a read past it is served from the same buffer) and, for a blocked
// path, waits on the gate first.
type file struct {
	*fs.LoopbackFile
	srv     *Server
	rel     string
	blocked bool
}

var _ fs.FileReader = (*file)(nil)

func (f *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if f.blocked {
		if errno := f.srv.wait(ctx); errno != 0 {
			return nil, errno
		}
	}
	if off == 0 {
		f.srv.delay(f.rel)
	}
	return f.LoopbackFile.Read(ctx, buf, off)
}

// Mount serves the tree at src read-only on mnt. The caller unmounts.
func Mount(src, mnt string, srv *Server) (*fuse.Server, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(src, &st); err != nil {
		return nil, fmt.Errorf("tree %s: %w", src, err)
	}
	rootData := &fs.LoopbackRoot{Path: src, Dev: st.Dev}
	root := &node{LoopbackNode: &fs.LoopbackNode{RootData: rootData}, srv: srv}
	rootData.RootNode = root
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, fmt.Errorf("slowfs needs FUSE (/dev/fuse) and root to mount: %w", err)
	}
	// The tree does not change while served: the kernel may keep names,
	// attributes and misses for as long as it likes, as it keeps sysfs
	// dentries, so that a path walk costs no round trip per component.
	forever := time.Hour
	opts := &fs.Options{EntryTimeout: &forever, AttrTimeout: &forever, NegativeTimeout: &forever, MountOptions: fuse.MountOptions{
		FsName: "slowfs", Name: "slowfs",
		// mount(2) ourselves: no fusermount is needed when run as root.
		DirectMountStrict: true,
		DirectMountFlags:  syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_RDONLY,
		// Other users (an exporter run as nobody) may read it too.
		AllowOther: true,
	}}
	s, err := fs.Mount(mnt, root, opts)
	if err != nil {
		return nil, fmt.Errorf("mount %s on %s (needs root and /dev/fuse): %w", src, mnt, err)
	}
	return s, nil
}
