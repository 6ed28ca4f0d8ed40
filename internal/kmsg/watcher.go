// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package kmsg reads the kernel log (/dev/kmsg below --path.rootfs) in
// the background and counts the messages that mean trouble for an RDMA
// device: firmware health failures, command timeouts, refused register
// accesses, power, temperature, modules, transmit timeouts, link downs
// and PCIe errors (Events, the matcher table). It keeps counts per
// subject (the PCI function or netdev a message names) and event, and the
// last message of each, all bounded; the host maps subjects to RDMA
// devices.
//
// /dev/kmsg is opened non-blocking and drained every Interval until it
// answers EAGAIN, so a quiet log costs one system call per interval and a
// scrape never waits for it. On open the reader is at the oldest record
// still in the kernel's ring buffer: what it reads before it first runs
// dry is the history since boot (or since the ring wrapped), counted apart
// (Report.Counts' History) so that a restart of rdma_doctor never looks
// like new events. Without permission (dmesg_restrict=1 and no
// CAP_SYSLOG: EPERM) or without the device, the reader reports why
// (Status.Reason), logs it once and tries again every RetryOpen.
//
// A regular file or a FIFO in place of /dev/kmsg (tests, fixture trees)
// is read the same way: records split at lines, continuation lines
// joined to their record.
package kmsg

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"syscall"
	"time"
)

// Defaults and bounds.
const (
	DefaultInterval  = 250 * time.Millisecond
	DefaultRetryOpen = 5 * time.Minute
	// MaxKeys bounds the (subject, event) pairs counted: beyond it a new
	// pair counts under the empty subject (Stats.Overflow says how often).
	MaxKeys = 512
	// MaxLast bounds the last-message table; the least recently seen
	// entry goes first.
	MaxLast = 128
	// MaxMessage bounds a kept message, in bytes, before redaction.
	MaxMessage = 512
	// readBuf holds one record: the kernel refuses (EINVAL) a read
	// smaller than its record, at most 8 KiB with the dictionary.
	readBuf = 16 << 10
	// maxPending bounds an unterminated line from a file or FIFO.
	maxPending = 64 << 10
	// maxPerRound bounds the records one round reads, so a flood of
	// kernel messages shares the CPU with everything else.
	maxPerRound = 100000
)

// Reasons why the log is not read: a bounded set, the reason label.
const (
	ReasonPermission = "permission"
	ReasonAbsent     = "absent"
	ReasonError      = "error"
)

// Options configure a Watcher.
type Options struct {
	// Path is the host path of the kernel log (<rootfs>/dev/kmsg).
	Path string
	// Interval between two drains; 0 is DefaultInterval.
	Interval time.Duration
	// RetryOpen is how long an unreadable log waits before the next
	// open; 0 is DefaultRetryOpen.
	RetryOpen time.Duration
	// Redact turns a message into what may be shown (secrets removed,
	// length capped); nil keeps it as read, capped at MaxMessage.
	Redact func(string) string
	// BootTime is when the host booted, which dates the records read
	// from the ring buffer; zero leaves them undated.
	BootTime time.Time
	// Logger gets one line per change of reason; nil logs nothing.
	Logger *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Events is the matcher table; nil is Events.
	Events []Event
}

// Status says whether the log is read, and if not why.
type Status struct {
	Reading bool
	// Reason is one of the Reason constants when not reading.
	Reason string
	// Err is the error behind Reason.
	Err error
}

// Count is one subject's count of one event.
type Count struct {
	Subject Subject
	Event   int // index in the events
	// Live counts the records read after the ring buffer's history;
	// History those already there when the reader started.
	Live, History uint64
}

// Last is the last message of one event for one subject.
type Last struct {
	Subject Subject
	Event   int
	// Message is the last one, redacted and capped; Repeats counts the
	// times it was logged identically.
	Message string
	Repeats uint64
	// First and Last date the event's first and last record (zero when
	// undated: ring-buffer history without a boot time).
	First, Last time.Time
	// History is set while every record of it came from the ring buffer
	// before rdma_doctor started.
	History bool
}

// Stats are the reader's own counts.
type Stats struct {
	Records, Bytes, Matched uint64
	// Lost counts records the kernel overwrote before they were read
	// (sequence gaps); Overruns the EPIPE answers that reported them.
	Lost, Overruns uint64
	// Unparsable counts records and lines that are not /dev/kmsg records.
	Unparsable uint64
	// HistoryRecords counts the records read from the ring buffer at
	// start; HistoryDone is set once the reader caught up.
	HistoryRecords uint64
	HistoryDone    bool
	// Overflow counts events counted under the empty subject because
	// MaxKeys pairs were already counted.
	Overflow uint64
}

// Report is a copy of what the watcher knows.
type Report struct {
	Status Status
	Stats  Stats
	Counts []Count
	Last   []Last
	// Events is the table the indexes refer to.
	Events []Event
}

type key struct {
	s  Subject
	ev int
}

// Watcher reads the kernel log. Its methods are safe for concurrent use.
type Watcher struct {
	opts    Options
	matcher *Matcher

	// fd and the splitting state are the reader goroutine's own.
	fd       int
	isChar   bool
	pending  []byte
	buf      []byte
	lastSeq  uint64
	haveSeq  bool
	inRecord []byte // the record being assembled from a file or FIFO

	mu     sync.Mutex
	status Status
	stats  Stats
	counts map[key]*Count
	last   map[key]*Last
}

// New returns a watcher; Run starts it.
func New(o Options) (*Watcher, error) {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.RetryOpen <= 0 {
		o.RetryOpen = DefaultRetryOpen
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Events == nil {
		o.Events = Events
	}
	m, err := NewMatcher(o.Events)
	if err != nil {
		return nil, err
	}
	return &Watcher{opts: o, matcher: m, fd: -1, buf: make([]byte, readBuf),
		counts: map[key]*Count{}, last: map[key]*Last{}}, nil
}

// Run reads until ctx ends. first, if not nil, is closed once the first
// attempt is over: the history is read, or the log is known unreadable.
func (w *Watcher) Run(ctx context.Context, first chan<- struct{}) {
	defer w.close()
	var retryAt time.Time
	tick := time.NewTicker(w.opts.Interval)
	defer tick.Stop()
	for {
		if w.fd < 0 && !w.opts.Now().Before(retryAt) {
			if !w.open() {
				retryAt = w.opts.Now().Add(w.opts.RetryOpen)
			}
		}
		if w.fd >= 0 {
			w.Drain()
		}
		if first != nil {
			close(first)
			first = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// open opens the log, or records why it cannot.
func (w *Watcher) open() bool {
	fd, err := openNonblock(w.opts.Path)
	if err != nil {
		w.setStatus(Status{Reason: reasonOf(err), Err: err})
		return false
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err == nil {
		w.isChar = st.Mode&syscall.S_IFMT == syscall.S_IFCHR
	}
	w.fd = fd
	w.setStatus(Status{Reading: true})
	return true
}

func openNonblock(p string) (int, error) {
	for {
		fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC|syscall.O_NOCTTY, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

func reasonOf(err error) string {
	switch {
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return ReasonPermission
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTDIR):
		return ReasonAbsent
	}
	return ReasonError
}

func (w *Watcher) setStatus(s Status) {
	w.mu.Lock()
	old := w.status
	w.status = s
	w.mu.Unlock()
	if w.opts.Logger == nil || old.Reading == s.Reading && old.Reason == s.Reason {
		return
	}
	if s.Reading {
		w.opts.Logger.Info("reading the kernel log", "path", w.opts.Path)
		return
	}
	hint := "the rdma_kernel_events_* series are left out; retrying every " + w.opts.RetryOpen.String()
	if s.Reason == ReasonPermission {
		hint = "reading /dev/kmsg needs CAP_SYSLOG where kernel.dmesg_restrict=1; " + hint
	}
	w.opts.Logger.Warn("cannot read the kernel log", "path", w.opts.Path, "reason", s.Reason, "err", s.Err, "hint", hint)
}

// Drain reads every record available now (at most maxPerRound).
func (w *Watcher) Drain() {
	history := !w.historyDone()
	for n := 0; n < maxPerRound; n++ {
		k, err := syscall.Read(w.fd, w.buf)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EPIPE:
			// The ring overwrote records we had not read; the next
			// read returns the oldest left. The sequence gap counts
			// how many.
			w.mu.Lock()
			w.stats.Overruns++
			w.mu.Unlock()
			continue
		case err == syscall.EAGAIN || err == nil && k == 0:
			w.flush(history)
			w.endHistory()
			return
		case err != nil:
			// EINVAL (a record larger than the buffer: not the
			// kernel's /dev/kmsg) or an I/O error: stop, retry later.
			w.flush(history)
			w.endHistory()
			w.closeFD()
			w.setStatus(Status{Reason: reasonOf(err), Err: &pathError{w.opts.Path, err}})
			return
		}
		if w.isChar {
			w.record(w.buf[:k], history) // one read, one record
			continue
		}
		w.feed(w.buf[:k], history)
	}
}

type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return "read " + e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

// feed splits a file's or FIFO's bytes into records: a line that begins
// with a space continues the record before it.
func (w *Watcher) feed(b []byte, history bool) {
	w.pending = append(w.pending, b...)
	start := 0
	for {
		i := bytes.IndexByte(w.pending[start:], '\n')
		if i < 0 {
			break
		}
		line := w.pending[start : start+i+1]
		start += i + 1
		if line[0] == ' ' && len(w.inRecord) > 0 {
			w.inRecord = append(w.inRecord, line...)
			continue
		}
		w.flush(history)
		if line[0] == ' ' || len(line) == 1 {
			continue // a continuation without its record, a blank line
		}
		w.inRecord = append(w.inRecord[:0], line...)
	}
	w.pending = append(w.pending[:0], w.pending[start:]...)
	if len(w.pending) > maxPending {
		w.pending = w.pending[:0]
		w.mu.Lock()
		w.stats.Unparsable++
		w.mu.Unlock()
	}
}

// flush handles the record being assembled.
func (w *Watcher) flush(history bool) {
	if len(w.inRecord) > 0 {
		w.record(w.inRecord, history)
		w.inRecord = w.inRecord[:0]
	}
}

// record counts one record.
func (w *Watcher) record(b []byte, history bool) {
	r, err := ParseRecord(b)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats.Bytes += uint64(len(b))
	if err != nil {
		w.stats.Unparsable++
		return
	}
	if w.haveSeq && r.Seq <= w.lastSeq {
		return // read before a reopen: counted once
	}
	if w.haveSeq && r.Seq > w.lastSeq+1 {
		w.stats.Lost += r.Seq - w.lastSeq - 1
	}
	w.lastSeq, w.haveSeq = r.Seq, true
	w.stats.Records++
	if history {
		w.stats.HistoryRecords++
	}
	if r.Facility != 0 {
		return // written from user space: anyone with write access could forge it
	}
	ix, subj := w.matcher.Match(r.Message)
	if ix < 0 {
		return
	}
	w.stats.Matched++
	subj = dictSubject(subj, r.Device)
	at := w.opts.Now()
	if history {
		at = time.Time{}
		if !w.opts.BootTime.IsZero() {
			at = w.opts.BootTime.Add(time.Duration(r.Usec) * time.Microsecond)
		}
	}
	k := key{subj, ix}
	c := w.counts[k]
	if c == nil {
		if len(w.counts) >= MaxKeys {
			w.stats.Overflow++
			k = key{Subject{}, ix}
			c = w.counts[k]
		}
		if c == nil {
			c = &Count{Subject: k.s, Event: ix}
			w.counts[k] = c
		}
	}
	if history {
		c.History++
	} else {
		c.Live++
	}
	w.remember(k, r.Message, at, history)
}

// remember keeps the last message of k; an identical message counts as a
// repeat of it.
func (w *Watcher) remember(k key, raw []byte, at time.Time, history bool) {
	if len(raw) > MaxMessage {
		raw = raw[:MaxMessage]
	}
	l := w.last[k]
	if l == nil {
		if len(w.last) >= MaxLast {
			w.evictOldest()
		}
		l = &Last{Subject: k.s, Event: k.ev, First: at, History: true}
		w.last[k] = l
	}
	msg := string(raw)
	if w.opts.Redact != nil {
		msg = w.opts.Redact(msg)
	}
	if msg == l.Message {
		l.Repeats++
	} else {
		l.Message, l.Repeats = msg, 1
	}
	if l.First.IsZero() {
		l.First = at
	}
	l.Last = at
	l.History = l.History && history
}

func (w *Watcher) evictOldest() {
	var oldest key
	var t time.Time
	first := true
	for k, l := range w.last {
		if first || l.Last.Before(t) {
			oldest, t, first = k, l.Last, false
		}
	}
	delete(w.last, oldest)
}

func (w *Watcher) historyDone() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats.HistoryDone
}

func (w *Watcher) endHistory() {
	w.mu.Lock()
	w.stats.HistoryDone = true
	w.mu.Unlock()
}

func (w *Watcher) closeFD() {
	if w.fd >= 0 {
		syscall.Close(w.fd)
		w.fd = -1
	}
}

func (w *Watcher) close() { w.closeFD() }

// Report returns a copy of the counts, the last messages and the status,
// sorted for stable output.
func (w *Watcher) Report() Report {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := Report{Status: w.status, Stats: w.stats, Events: w.opts.Events,
		Counts: make([]Count, 0, len(w.counts)), Last: make([]Last, 0, len(w.last))}
	for _, c := range w.counts {
		r.Counts = append(r.Counts, *c)
	}
	for _, l := range w.last {
		r.Last = append(r.Last, *l)
	}
	sort.Slice(r.Counts, func(i, j int) bool {
		return less(r.Counts[i].Subject, r.Counts[i].Event, r.Counts[j].Subject, r.Counts[j].Event)
	})
	sort.Slice(r.Last, func(i, j int) bool {
		return less(r.Last[i].Subject, r.Last[i].Event, r.Last[j].Subject, r.Last[j].Event)
	})
	return r
}

func less(a Subject, ae int, b Subject, be int) bool {
	if a != b {
		if a.PCI != b.PCI {
			return a.PCI < b.PCI
		}
		if a.Netdev != b.Netdev {
			return a.Netdev < b.Netdev
		}
		return a.IBDev < b.IBDev
	}
	return ae < be
}
