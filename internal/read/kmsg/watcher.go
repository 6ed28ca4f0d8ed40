// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package kmsg reads the kernel log (/dev/kmsg below --path.rootfs) in
// the background and counts the messages that mean trouble for an RDMA
// device: firmware health failures, command timeouts, refused register
// accesses, power, temperature, modules, transmit timeouts, link downs
// and PCIe errors, of every driver family it has rules for (Events, the
// kinds, and Rules, each driver's messages). It keeps counts per subject
// (the PCI function or netdev a message names) and event, and the last
// message of each, all bounded; the host maps subjects to RDMA devices.
//
// The kernel's log (a character device 1:11) is opened non-blocking and
// read through the Go runtime's poller: the reader sleeps until the
// kernel has a record, so a silent log costs no wake-up at all, and
// closing the file (cancellation) ends the read at once. On open the
// reader is at the oldest record still in the kernel's ring buffer: what
// it reads before it first runs dry (EAGAIN) is the history since boot
// (or since the ring wrapped), counted apart (Report.Counts' History) so
// that a restart of rdma_doctor never looks like new events. Records the
// ring overwrote before they were read answer EPIPE and leave a gap in the
// sequence numbers: counted (Stats.Overruns, Stats.Lost).
//
// Without permission (dmesg_restrict=1 and no CAP_SYSLOG: EPERM) the
// reader reports why (Status.Reason), logs it once and tries again every
// RetryOpen. Without the file, or with something else in its place (a
// character device that is not the kernel log, a directory, a socket), it
// reports why, logs it once, and does not try again: nothing polls.
//
// A regular file or a FIFO in place of /dev/kmsg (tests, fixture trees)
// cannot be waited on: it is drained every Interval, records split at
// lines, continuation lines joined to their record, at most maxPerRound
// reads a round and maxPending bytes of an unfinished line.
package kmsg

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"sort"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Defaults and bounds.
const (
	DefaultInterval  = 250 * time.Millisecond
	DefaultRetryOpen = 5 * time.Minute
	// MaxKeys bounds the (subject, event) slots counted. When they are
	// all taken, a message about one of the host's RDMA devices takes
	// the slot of a subject that is not one (its counts move under the
	// empty subject: Stats.Evicted), and any other message counts under
	// the empty subject (Stats.Overflow).
	MaxKeys = 512
	// MaxLast bounds the last-message table; the least recently seen
	// entry of the least important kind goes first.
	MaxLast = 128
	// MaxMessage bounds a kept message, in bytes, before redaction.
	MaxMessage = 512
	// readBuf holds one record: the kernel refuses (EINVAL) a read
	// smaller than its record, at most 8 KiB with the dictionary.
	readBuf = 16 << 10
	// maxPending bounds an unterminated line from a file or FIFO.
	maxPending = 64 << 10
	// maxPerRound bounds the reads one round of a file or FIFO makes, so
	// a flood (or /dev/kmsg replaced by an endless file) shares the CPU
	// with everything else.
	maxPerRound = 4096
	// maxGap is the largest sequence gap taken for records the ring
	// overwrote: the kernel's ring holds far fewer records. A larger jump
	// (or one backwards past maxBack) is not the same log any more: a
	// reset (Stats.SeqResets).
	maxGap = 1 << 32
	// maxBack is how far back a sequence number may go and still be a
	// record read before (a reopen, a file rewritten with the same
	// records): skipped and counted (Stats.Duplicates).
	maxBack = 1 << 20
	// maxUsec bounds a record's time since boot (100 years): beyond it
	// the record is left undated instead of overflowing the date.
	maxUsec = 100 * 365 * 24 * 3600 * 1e6
	// kmsgMajor and kmsgMinor are the kernel log's character device
	// (Documentation/admin-guide/devices.txt: 1 char, 11 = /dev/kmsg).
	kmsgMajor, kmsgMinor = 1, 11
)

// Reasons why the log is not read: a bounded set, the reason label.
const (
	ReasonPermission = "permission"
	ReasonAbsent     = "absent"
	// ReasonNotKmsg: something else is where the log should be (a
	// character device other than 1:11, a directory, a socket): refused,
	// never read.
	ReasonNotKmsg = "not_kmsg"
	ReasonError   = "error"
)

// Options configure a Watcher.
type Options struct {
	// Path is the host path of the kernel log (<rootfs>/dev/kmsg).
	Path string
	// Interval between two drains of a regular file or FIFO in place of
	// the log (the kernel's log is waited on, not polled); 0 is
	// DefaultInterval.
	Interval time.Duration
	// RetryOpen is how long a log unreadable for want of permission or
	// for an I/O error waits before the next open; 0 is
	// DefaultRetryOpen.
	RetryOpen time.Duration
	// Redact turns a message into what may be shown (secrets removed,
	// length capped); nil keeps it as read, capped at MaxMessage.
	Redact func(string) string
	// BootTime is when the host booted, which dates the records read
	// from the ring buffer; zero leaves them undated.
	BootTime time.Time
	// Logger gets one line per change of reason; nil logs nothing.
	Logger *slog.Logger
	// NotLive says the root is not a live host's (a fixture tree, a
	// copy: host.LiveReasonNotSysfs): there an absent log is what is
	// expected and is logged at info, not as a warning a newcomer running
	// make run has to puzzle over. The series are left out all the same.
	NotLive bool
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Events and Rules are the matcher's tables; nil is Events, Rules.
	Events []Event
	Rules  []Rule
	// IsRDMA reports whether a subject is one of the host's RDMA devices
	// (it must be cheap and safe for concurrent use): their messages keep
	// their slots when the table is full. Nil knows none.
	IsRDMA func(Subject) bool
}

// Status says whether the log is read, and if not why.
type Status struct {
	Reading bool
	// Reason is one of the Reason constants when not reading.
	Reason string
	// Err is the error behind Reason.
	Err error
	// Polled is set while the log is a regular file or a FIFO drained
	// every Interval rather than the kernel's log waited on.
	Polled bool
}

// Count is one subject's count of one event.
type Count struct {
	Subject Subject
	Event   int // index in the events
	// Family is the driver family of the last rule that matched.
	Family Family
	// Live counts the records read after the ring buffer's history;
	// History those already there when the reader started.
	Live, History uint64
}

// Last is the last message of one event for one subject.
type Last struct {
	Subject Subject
	Event   int
	Family  Family
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
	// Duplicates counts records skipped because their sequence number
	// was read already (a reopen reads the ring again); SeqResets the
	// jumps of the sequence number no ring explains (a rewritten file),
	// after which counting goes on from the new number.
	Duplicates, SeqResets uint64
	// HistoryRecords counts the records read from the ring buffer at
	// start; HistoryDone is set once the reader caught up.
	HistoryRecords uint64
	HistoryDone    bool
	// Overflow counts events counted under the empty subject because
	// every slot was taken; Evicted the slots given up to a message
	// about one of the host's RDMA devices (their counts moved under the
	// empty subject).
	Overflow, Evicted uint64
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

// A slot's tier orders who keeps a slot when the table is full.
const (
	tierForeign uint8 = iota // an RDMAOnly event of a subject not known as RDMA
	tierOther                // another subject, named by an RDMA driver's message
	tierRDMA                 // one of the host's RDMA devices
)

type slot struct {
	Count
	tier uint8
}

type lastSlot struct {
	v    Last
	tier uint8
}

// Watcher reads the kernel log. Its methods are safe for concurrent use.
type Watcher struct {
	opts    Options
	matcher *Matcher

	// fd, file and the splitting state are the reader goroutine's own.
	fd       int
	file     *os.File // the kernel's log, read through the poller
	pending  []byte
	skipping bool // dropping the rest of an overlong line
	buf      []byte
	lastSeq  uint64
	haveSeq  bool
	inRecord []byte // the record being assembled from a file or FIFO
	reads    uint64 // read system calls, for the tests

	mu       sync.Mutex
	status   Status
	stats    Stats
	counts   map[key]*slot
	tiers    [3]int         // slots per tier
	overflow map[int]*Count // per event, under the empty subject
	last     map[key]*lastSlot
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
	if o.Rules == nil {
		o.Rules = Rules
	}
	m, err := NewMatcher(o.Events, o.Rules)
	if err != nil {
		return nil, err
	}
	return &Watcher{opts: o, matcher: m, fd: -1, buf: make([]byte, readBuf),
		counts: map[key]*slot{}, overflow: map[int]*Count{}, last: map[key]*lastSlot{}}, nil
}

// Run reads until ctx ends. first, if not nil, is closed once the first
// attempt is over: the history is read, or the log is known unreadable.
func (w *Watcher) Run(ctx context.Context, first chan<- struct{}) {
	defer w.close()
	done := func() {
		if first != nil {
			close(first)
			first = nil
		}
	}
	defer done()
	for ctx.Err() == nil {
		kind, ok := w.open()
		if ok && kind == kindKmsg {
			w.follow(ctx, done)
		} else if ok {
			w.poll(ctx, done)
		}
		done()
		if ctx.Err() != nil {
			return
		}
		st := w.Report().Status
		if st.Reason == ReasonAbsent || st.Reason == ReasonNotKmsg {
			// Nothing to wait for: a restart picks up a log mounted
			// later. Said once in the log and in
			// rdma_kernel_log_reading{reason}.
			<-ctx.Done()
			return
		}
		t := time.NewTimer(w.opts.RetryOpen)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

type fileKind int

const (
	kindKmsg fileKind = iota
	kindFile          // a regular file or a FIFO: drained every Interval
)

// open opens the log, or records why it cannot. Only the kernel's log, a
// regular file or a FIFO is opened: the type is checked before the open
// (opening an arbitrary device can have effects) and again on the open
// file.
func (w *Watcher) open() (fileKind, bool) {
	var st unix.Stat_t
	if err := unix.Stat(w.opts.Path, &st); err != nil {
		w.setStatus(Status{Reason: reasonOf(err), Err: &fs.PathError{Op: "stat", Path: w.opts.Path, Err: err}})
		return 0, false
	}
	if _, err := kindOf(&st); err != nil {
		w.setStatus(Status{Reason: ReasonNotKmsg, Err: &fs.PathError{Op: "open", Path: w.opts.Path, Err: err}})
		return 0, false
	}
	fd, err := openNonblock(w.opts.Path)
	if err != nil {
		w.setStatus(Status{Reason: reasonOf(err), Err: &fs.PathError{Op: "open", Path: w.opts.Path, Err: err}})
		return 0, false
	}
	kind, err := fstatKind(fd)
	if err != nil {
		unix.Close(fd)
		w.setStatus(Status{Reason: ReasonNotKmsg, Err: &fs.PathError{Op: "open", Path: w.opts.Path, Err: err}})
		return 0, false
	}
	// A reopen reads the ring from its oldest record again: the records
	// up to lastSeq are duplicates, skipped and counted (record).
	w.pending, w.inRecord, w.skipping = w.pending[:0], w.inRecord[:0], false
	if kind == kindKmsg {
		w.file = os.NewFile(uintptr(fd), w.opts.Path) // non-blocking: the poller's
	} else {
		w.fd = fd
	}
	w.setStatus(Status{Reading: true, Polled: kind != kindKmsg})
	return kind, true
}

// errNotKmsg is a file that is not the kernel's log.
var errNotKmsg = errors.New("not the kernel log: want character device 1:11, a regular file or a FIFO")

func kindOf(st *unix.Stat_t) (fileKind, error) {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		if unix.Major(uint64(st.Rdev)) == kmsgMajor && unix.Minor(uint64(st.Rdev)) == kmsgMinor {
			return kindKmsg, nil
		}
	case unix.S_IFREG, unix.S_IFIFO:
		return kindFile, nil
	}
	return 0, errNotKmsg
}

func fstatKind(fd int) (fileKind, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	return kindOf(&st)
}

func openNonblock(p string) (int, error) {
	for {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		if err != unix.EINTR {
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
		how := "waiting on it through the runtime's poller"
		if s.Polled {
			how = "a regular file or FIFO, not the kernel's log: drained every " + w.opts.Interval.String()
		}
		w.opts.Logger.Info("reading the kernel log", "path", w.opts.Path, "how", how)
		return
	}
	if s.Reason == ReasonAbsent && w.opts.NotLive {
		w.opts.Logger.Info("no kernel log below this root, as expected of a tree that is not a live host's", "path", w.opts.Path,
			"hint", "the rdma_kernel_events_* series are left out")
		return
	}
	hint := "the rdma_kernel_events_* series are left out; retrying every " + w.opts.RetryOpen.String()
	switch s.Reason {
	case ReasonPermission:
		hint = "reading /dev/kmsg needs CAP_SYSLOG where kernel.dmesg_restrict=1; " + hint
	case ReasonAbsent:
		hint = "the rdma_kernel_events_* series are left out; not retried: mount the host's /dev/kmsg there and restart rdma_doctor"
	case ReasonNotKmsg:
		hint = "refused, never read: the kernel log is character device 1:11; the rdma_kernel_events_* series are left out"
	}
	w.opts.Logger.Warn("cannot read the kernel log", "path", w.opts.Path, "reason", s.Reason, "err", s.Err, "hint", hint)
}

// follow reads the kernel's log until ctx ends or a read fails: each
// read returns one record; EAGAIN parks the goroutine in the runtime's
// poller until the kernel has the next one (or ctx closes the file).
func (w *Watcher) follow(ctx context.Context, caughtUp func()) {
	f := w.file
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer stop()
	rc, err := f.SyscallConn()
	if err != nil {
		w.failRead(err)
		return
	}
	history := !w.historyDone()
	for {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			for {
				w.reads++
				n, rerr = unix.Read(int(fd), w.buf)
				if rerr == unix.EINTR {
					continue
				}
				if rerr == unix.EAGAIN {
					if history {
						history = false
						w.endHistory()
						caughtUp()
					}
					return false // wait in the poller
				}
				return true
			}
		})
		switch {
		case err != nil: // closed: ctx ended
			return
		case rerr == unix.EPIPE:
			// The ring overwrote records we had not read; the next
			// read returns the oldest left. The sequence gap counts
			// how many.
			w.mu.Lock()
			w.stats.Overruns++
			w.mu.Unlock()
		case rerr != nil:
			w.failRead(rerr)
			return
		case n == 0:
			w.failRead(errors.New("end of file on the kernel log"))
			return
		default:
			w.record(w.buf[:n], history)
		}
	}
}

// failRead closes the log after a read error and says why.
func (w *Watcher) failRead(err error) {
	w.endHistory()
	w.closeFD()
	w.setStatus(Status{Reason: reasonOf(err), Err: &fs.PathError{Op: "read", Path: w.opts.Path, Err: err}})
}

// poll drains a regular file or FIFO every Interval until ctx ends or a
// read fails.
func (w *Watcher) poll(ctx context.Context, drained func()) {
	tick := time.NewTicker(w.opts.Interval)
	defer tick.Stop()
	for {
		w.Drain()
		drained()
		if w.fd < 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Drain reads every record a regular file or FIFO has now (at most
// maxPerRound reads).
func (w *Watcher) Drain() {
	if w.fd < 0 {
		return
	}
	history := !w.historyDone()
	for n := 0; n < maxPerRound; n++ {
		w.reads++
		k, err := unix.Read(w.fd, w.buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN || err == nil && k == 0:
			w.flush(history)
			w.endHistory()
			return
		case err != nil:
			w.flush(history)
			w.failRead(err)
			return
		}
		w.feed(w.buf[:k], history)
	}
	// A round's bound reached: the rest (and the record being assembled,
	// whose continuation lines may follow) waits for the next round.
}

// feed splits a file's or FIFO's bytes into records: a line that begins
// with a space continues the record before it. An unterminated line
// longer than maxPending is dropped to its end and counted.
func (w *Watcher) feed(b []byte, history bool) {
	if w.skipping {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return
		}
		w.skipping = false
		b = b[i+1:]
	}
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
			if len(w.inRecord)+len(line) <= readBuf {
				w.inRecord = append(w.inRecord, line...)
			}
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
		w.skipping = true
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
	if w.haveSeq {
		switch {
		case r.Seq <= w.lastSeq && (w.file != nil || w.lastSeq-r.Seq < maxBack):
			// The kernel's numbers only grow within a boot: anything
			// not above the last is a record read before.
			w.stats.Duplicates++ // counted once
			return
		case r.Seq < w.lastSeq, r.Seq-w.lastSeq > maxGap:
			w.stats.SeqResets++ // not the same sequence: count on from here
		case r.Seq > w.lastSeq+1:
			w.stats.Lost += r.Seq - w.lastSeq - 1
		}
	}
	w.lastSeq, w.haveSeq = r.Seq, true
	w.stats.Records++
	if history {
		w.stats.HistoryRecords++
	}
	if r.Facility != 0 {
		return // written from user space: anyone with write access could forge it
	}
	rule, subj := w.matcher.Match(r.Message)
	if rule < 0 {
		return
	}
	w.stats.Matched++
	ix, fam := w.matcher.Event(rule), w.matcher.Family(rule)
	subj = dictSubject(subj, r.Device)
	at := w.opts.Now()
	if history {
		at = time.Time{}
		if !w.opts.BootTime.IsZero() && r.Usec < maxUsec {
			at = w.opts.BootTime.Add(time.Duration(r.Usec) * time.Microsecond)
		}
	}
	k := key{subj, ix}
	tier := w.tierOf(subj, ix)
	c := w.slotFor(k, tier)
	c.Family = fam
	if history {
		c.History++
	} else {
		c.Live++
	}
	w.remember(k, tier, fam, r.Message, at, history)
}

// tierOf says how much a subject's slot is worth keeping.
func (w *Watcher) tierOf(s Subject, ev int) uint8 {
	switch {
	case w.opts.IsRDMA != nil && w.opts.IsRDMA(s):
		return tierRDMA
	case w.opts.Events[ev].RDMAOnly:
		return tierForeign
	}
	return tierOther
}

// slotFor is k's count: its own slot, a slot taken from a subject of a
// lower tier, or the event's count under the empty subject.
func (w *Watcher) slotFor(k key, tier uint8) *Count {
	if s := w.counts[k]; s != nil {
		return &s.Count
	}
	if len(w.counts) >= MaxKeys && !w.evict(tier) {
		w.stats.Overflow++
		o := w.overflow[k.ev]
		if o == nil {
			o = &Count{Event: k.ev}
			w.overflow[k.ev] = o
		}
		return o
	}
	s := &slot{Count: Count{Subject: k.s, Event: k.ev}, tier: tier}
	w.counts[k] = s
	w.tiers[tier]++
	return &s.Count
}

// evict gives up a slot of a tier below tier, its counts moved under the
// empty subject; false when there is none. The scan runs only when the
// table is full and such a slot exists.
func (w *Watcher) evict(tier uint8) bool {
	low := uint8(0)
	for low < tier && w.tiers[low] == 0 {
		low++
	}
	if low >= tier {
		return false
	}
	for k, s := range w.counts {
		if s.tier != low {
			continue
		}
		o := w.overflow[k.ev]
		if o == nil {
			o = &Count{Event: k.ev}
			w.overflow[k.ev] = o
		}
		o.Live += s.Live
		o.History += s.History
		delete(w.counts, k)
		w.tiers[low]--
		w.stats.Evicted++
		return true
	}
	return false
}

// remember keeps the last message of k; an identical message counts as a
// repeat of it. A full table gives up the oldest entry of the lowest
// tier, if that tier is not above k's; else k's message is not kept.
func (w *Watcher) remember(k key, tier uint8, fam Family, raw []byte, at time.Time, history bool) {
	if len(raw) > MaxMessage {
		raw = raw[:MaxMessage]
	}
	ls := w.last[k]
	if ls == nil {
		if len(w.last) >= MaxLast && !w.evictLast(tier) {
			return
		}
		ls = &lastSlot{v: Last{Subject: k.s, Event: k.ev, First: at, History: true}, tier: tier}
		w.last[k] = ls
	}
	l := &ls.v
	l.Family = fam
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

func (w *Watcher) evictLast(tier uint8) bool {
	var victim key
	var vt time.Time
	vtier, found := uint8(255), false
	for k, l := range w.last {
		if l.tier < vtier || l.tier == vtier && l.v.Last.Before(vt) {
			victim, vt, vtier, found = k, l.v.Last, l.tier, true
		}
	}
	if !found || vtier > tier {
		return false
	}
	delete(w.last, victim)
	return true
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
		unix.Close(w.fd)
		w.fd = -1
	}
	if w.file != nil {
		w.file.Close()
		w.file = nil
	}
}

func (w *Watcher) close() { w.closeFD() }

// Status is the reader's status alone: what a health check needs,
// without Report's copy and sort of every count.
func (w *Watcher) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

// Report returns a copy of the counts, the last messages and the status,
// sorted for stable output.
func (w *Watcher) Report() Report {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := Report{Status: w.status, Stats: w.stats, Events: w.opts.Events,
		Counts: make([]Count, 0, len(w.counts)+len(w.overflow)), Last: make([]Last, 0, len(w.last))}
	for _, c := range w.counts {
		r.Counts = append(r.Counts, c.Count)
	}
	for _, c := range w.overflow {
		r.Counts = append(r.Counts, *c)
	}
	for _, l := range w.last {
		r.Last = append(r.Last, l.v)
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
