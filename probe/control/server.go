// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest"
	"github.com/rdma-doctor/rdma_doctor/probe/tcpprobe"
)

// Responder limits.
const (
	// DefaultHandshakeTimeout bounds an unauthenticated connection: the
	// time from accepting it to its authenticated request. A prober sends
	// its request at once, in one round trip, so two seconds is ample;
	// an idle connection is closed then, or sooner when a newcomer needs
	// its slot (handshakePool).
	DefaultHandshakeTimeout = 2 * time.Second
	// DefaultMaxHandshakes bounds the connections not yet authenticated.
	// They have a pool of their own, larger than the sessions', so idle or
	// junk connections never take a session's place, and each of them
	// costs at most a goroutine and a socket for the handshake timeout.
	DefaultMaxHandshakes = 64
	// DefaultMaxHandshakesPerClient bounds them per client address, so a
	// single host cannot take the whole pool.
	DefaultMaxHandshakesPerClient = 8
	// evictGrace is the part of HandshakeTimeout during which a slot is
	// safe from a newcomer whose address holds as many (handshakePool).
	evictGrace = 4
	// maxSessions bounds concurrent authenticated sessions; perftest runs
	// are serialised per device anyway.
	maxSessions = 8
	// lockWait is how long a request waits for a device busy with another
	// probe before it is refused as busy.
	lockWait = 5 * time.Second
	// DefaultAuthFailureBurst is how many failed authentications (a
	// wrong secret, a malformed request) one client address may cost before its
	// connections are closed at accept; one more is allowed each
	// authFailureRefill. A flood of wrong secrets then costs an accept
	// and a close each, not a challenge, a goroutine and a MAC.
	DefaultAuthFailureBurst = 4
	authFailureRefill       = time.Second
	// maxTrackedClients bounds the addresses the failure limit remembers.
	maxTrackedClients = 4096
)

// Device is an HCA port the responder offers.
type Device struct {
	Name     string
	Port     int
	GIDIndex *int
}

// Server is the responder.
type Server struct {
	Secret         []byte
	AllowedTests   map[string]bool
	AllowedClients []*net.IPNet
	Devices        []Device
	PortLo, PortHi int
	MaxDuration    time.Duration
	Runner         *perftest.Runner
	Logger         *slog.Logger
	// HandshakeTimeout is how long a connection may take to authenticate
	// (default DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
	// MaxHandshakes bounds connections not yet authenticated (default
	// DefaultMaxHandshakes); more are closed at once.
	MaxHandshakes int
	// MaxHandshakesPerClient bounds them per client address (default
	// DefaultMaxHandshakesPerClient).
	MaxHandshakesPerClient int

	portsMu sync.Mutex
	ports   map[int]bool // perftest ports in use by this responder
	// handshakes and sessions are the two pools of slots: a connection
	// holds a handshake slot until it has authenticated, then a session
	// slot.
	handshakes *handshakePool
	sessions   chan struct{}
	failures   *failureLimit
	// crowded and refusals log what unauthenticated peers cause, which
	// anyone who can connect can repeat at will: the first of each kind,
	// then one count a minute.
	crowded, refusals *rateLog
	// logEvery is the rate logs' interval (tests shorten it).
	logEvery time.Duration
	// now is the clock of the failure limits (tests freeze it).
	now func() time.Time
}

// NewServer builds a responder from the config's probe section.
func NewServer(p *config.Probe, secret []byte, runner *perftest.Runner, logger *slog.Logger) (*Server, error) {
	if len(secret) < MinSecretLen {
		return nil, errors.New("responder: secret too short")
	}
	r := &p.Responder
	s := &Server{
		Secret:       secret,
		AllowedTests: map[string]bool{},
		MaxDuration:  r.MaxDurationOrDefault(),
		Runner:       runner,
		Logger:       logger,
	}
	s.PortLo, s.PortHi = r.PortRange()
	for _, t := range r.AllowedTests {
		s.AllowedTests[t] = true
	}
	for _, c := range r.AllowedClients {
		_, n, err := net.ParseCIDR(c)
		if err != nil {
			return nil, fmt.Errorf("responder: %w", err)
		}
		s.AllowedClients = append(s.AllowedClients, n)
	}
	for _, d := range r.Devices {
		s.Devices = append(s.Devices, Device{Name: d.Device, Port: d.Port, GIDIndex: d.GIDIndex})
	}
	return s, nil
}

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Serve accepts sessions on ln until ctx ends, then closes ln and waits for
// the sessions, which ctx also ends (their perftest servers are killed).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.init()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	// Counts still pending are logged when the responder stops.
	defer s.refusals.stop()
	defer s.crowded.stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("responder: %w", err)
		}
		if !s.failures.allow(hostOf(c.RemoteAddr()), s.now()) {
			s.crowded.log("remote", c.RemoteAddr().String(), "limit", "failed_handshakes",
				"burst", DefaultAuthFailureBurst, "refill", authFailureRefill)
			c.Close()
			continue
		}
		slot, evicted, full := s.handshakes.take(c)
		if slot == nil {
			s.crowded.log("remote", c.RemoteAddr().String(), "limit", full,
				"max_handshakes", s.MaxHandshakes, "max_handshakes_per_client", s.MaxHandshakesPerClient)
			c.Close()
			continue
		}
		if evicted != nil {
			// Its handshake fails at once and gives nothing back: the
			// slot is the newcomer's already.
			evicted.Close()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			// A bug in one session must not take the exporter down.
			defer func() {
				if r := recover(); r != nil {
					s.logger().Error("responder: session panicked", "remote", c.RemoteAddr(), "panic", r)
				}
			}()
			s.handle(ctx, c, slot)
		}()
	}
}

// init fills in the defaults of the fields a caller may leave zero.
func (s *Server) init() {
	s.portsMu.Lock()
	defer s.portsMu.Unlock()
	if s.handshakes != nil {
		return
	}
	if s.HandshakeTimeout <= 0 {
		s.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if s.MaxHandshakes <= 0 {
		s.MaxHandshakes = DefaultMaxHandshakes
	}
	if s.MaxHandshakesPerClient <= 0 {
		s.MaxHandshakesPerClient = DefaultMaxHandshakesPerClient
	}
	if s.logEvery <= 0 {
		s.logEvery = time.Minute
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.handshakes = newHandshakePool(s.MaxHandshakes, s.MaxHandshakesPerClient, s.HandshakeTimeout/evictGrace, s.now)
	s.failures = &failureLimit{burst: DefaultAuthFailureBurst, refill: authFailureRefill, maxTracked: maxTrackedClients, by: map[string]*bucket{}}
	s.sessions = make(chan struct{}, maxSessions)
	s.crowded = &rateLog{logger: s.logger(), level: slog.LevelWarn, every: s.logEvery,
		msg:     "responder: too many unauthenticated connections, refusing",
		summary: "responder: more connections refused while too many were unauthenticated"}
	s.refusals = &rateLog{logger: s.logger(), level: slog.LevelInfo, every: s.logEvery,
		msg:     "responder: unauthenticated request refused",
		summary: "responder: more unauthenticated requests refused"}
}

// session is one connection's state.
type session struct {
	s     *Server
	conn  net.Conn
	r     *bufio.Reader
	nonce string
	log   *slog.Logger
}

func (ss *session) reply(resp Response) error {
	body, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	return writeLine(ss.conn, envelope{Body: body, MAC: mac(ss.s.Secret, responseDomain, ss.nonce, body)})
}

func (ss *session) refuse(kind, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if ss.nonce == "" {
		// Unauthenticated: say no without a MAC, and nothing more; and
		// log it rate-limited, since anyone who can connect can repeat it.
		ss.s.refusals.log("remote", ss.conn.RemoteAddr().String(), "kind", kind, "reason", msg)
		_ = writeLine(ss.conn, envelope{Body: mustJSON(Response{Kind: kind, Error: msg})})
		return
	}
	ss.log.Info("responder: request refused", "kind", kind, "reason", msg)
	_ = ss.reply(Response{Kind: kind, Error: msg})
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// handle runs one connection: the handshake under its deadline and in a
// handshake slot, then the session in a session slot.
func (s *Server) handle(ctx context.Context, c net.Conn, slot *slot) {
	ss, req, ok := s.handshake(ctx, c, slot)
	if !ok {
		return
	}
	select {
	case s.sessions <- struct{}{}:
	default:
		ss.refuse(KindBusy, "too many probe sessions at once (%d)", maxSessions)
		return
	}
	defer func() { <-s.sessions }()
	_ = c.SetDeadline(time.Time{})
	switch req.Test {
	case "tcp_lat", "tcp_bw":
		s.serveTCP(ctx, ss, req)
	default:
		s.servePerftest(ctx, ss, req)
	}
}

// handshake challenges the peer and reads its request, all within
// HandshakeTimeout, and then gives back its handshake slot; ok is false
// when the connection is done with (refused or gone). A request that
// does not authenticate costs the address a token of its failure limit
// (one that never comes costs only its slot, which a newcomer can take).
func (s *Server) handshake(ctx context.Context, c net.Conn, slot *slot) (*session, Request, bool) {
	defer s.handshakes.give(slot)
	ss := &session{s: s, conn: c, r: bufio.NewReader(c), log: s.logger().With("remote", c.RemoteAddr().String())}
	_ = c.SetDeadline(time.Now().Add(s.HandshakeTimeout))
	// Shutting down ends a handshake at once, not at its deadline.
	defer context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })()
	if !s.clientAllowed(c.RemoteAddr()) {
		ss.refuse(KindForbidden, "client address not in probe.responder.allowed_clients")
		return nil, Request{}, false
	}
	challenge := randomHex()
	if err := writeLine(c, Hello{V: Version, Challenge: challenge}); err != nil {
		return nil, Request{}, false
	}
	var env envelope
	if err := readLine(ss.r, &env); err != nil {
		ss.log.Debug("responder: no request", "err", err)
		return nil, Request{}, false
	}
	req, kind, err := decodeRequest(s.Secret, challenge, env)
	if err != nil {
		s.failures.fail(hostOf(c.RemoteAddr()), s.now())
		ss.refuse(kind, "%v", err)
		return nil, Request{}, false
	}
	ss.nonce = req.Nonce
	ss.log = ss.log.With("test", req.Test)
	if !s.AllowedTests[req.Test] {
		ss.refuse(KindForbidden, "test %q is not in probe.responder.allowed_tests", req.Test)
		return nil, Request{}, false
	}
	return ss, req, true
}

// decodeRequest authenticates and decodes a request envelope. On error,
// kind is the refusal to send.
func decodeRequest(secret []byte, challenge string, env envelope) (Request, string, error) {
	var req Request
	if !verify(secret, requestDomain, challenge, env) {
		return req, KindUnauthorized, errors.New("bad MAC: the prober's probe.secret_file differs from ours")
	}
	dec := json.NewDecoder(bytes.NewReader(env.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, KindProtocol, fmt.Errorf("request: %w", err)
	}
	if len(req.Nonce) < 32 {
		return req, KindProtocol, errors.New("request without a nonce")
	}
	return req, "", nil
}

func (s *Server) clientAllowed(a net.Addr) bool {
	if len(s.AllowedClients) == 0 {
		return true
	}
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	for _, n := range s.AllowedClients {
		if n.Contains(ta.IP) {
			return true
		}
	}
	return false
}

// TCPRequest converts a control request to the TCP probe's.
func TCPRequest(req Request) tcpprobe.Request {
	mode := tcpprobe.ModeLatency
	if req.Test == "tcp_bw" {
		mode = tcpprobe.ModeBandwidth
	}
	return tcpprobe.Request{Mode: mode, Size: req.Size, Iterations: req.Iterations, Duration: req.Duration}.WithDefaults()
}

func (s *Server) serveTCP(ctx context.Context, ss *session, req Request) {
	tr := TCPRequest(req)
	if err := tr.Validate(s.MaxDuration); err != nil {
		ss.refuse(KindInvalid, "%v", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.MaxDuration+30*time.Second)
	defer cancel()
	if err := ss.reply(Response{OK: true}); err != nil {
		return
	}
	if err := tcpprobe.Serve(ctx, ss.conn, ss.r, tr); err != nil {
		ss.log.Info("responder: tcp probe ended", "err", err)
	}
}

func (s *Server) device(name string) (Device, bool) {
	if len(s.Devices) == 0 {
		return Device{}, false
	}
	if name == "" {
		return s.Devices[0], true
	}
	for _, d := range s.Devices {
		if d.Name == name {
			return d, true
		}
	}
	return Device{}, false
}

// PerftestParams is the responder side of a perftest request: its own
// device, the prober's test settings.
func PerftestParams(req Request, d Device) (perftest.Params, error) {
	t, err := perftest.ParseTest(req.Test)
	if err != nil {
		return perftest.Params{}, err
	}
	return perftest.Params{Test: t, Device: d.Name, IBPort: d.Port, GIDIndex: d.GIDIndex,
		Size: req.Size, Iterations: req.Iterations, Duration: req.Duration}, nil
}

func (s *Server) servePerftest(ctx context.Context, ss *session, req Request) {
	d, ok := s.device(req.Device)
	if !ok {
		ss.refuse(KindForbidden, "device %q is not in probe.responder.devices", req.Device)
		return
	}
	p, err := PerftestParams(req, d)
	if err == nil {
		err = p.Validate()
	}
	if err != nil {
		ss.refuse(KindInvalid, "%v", err)
		return
	}
	if p.Expected() > s.MaxDuration {
		ss.refuse(KindInvalid, "the run would take about %s, over probe.responder.max_duration %s", p.Expected(), s.MaxDuration)
		return
	}
	lockCtx, cancelLock := context.WithTimeout(ctx, lockWait)
	release, err := s.Runner.AcquireDevices(lockCtx, d.Name)
	cancelLock()
	if err != nil {
		ss.refuse(KindBusy, "device %s is busy with another probe", d.Name)
		return
	}
	defer release()
	port, freePort, err := s.takePort()
	if err != nil {
		ss.refuse(KindBusy, "%v", err)
		return
	}
	defer freePort()
	p.TCPPort = port

	ctx, cancel := context.WithTimeout(ctx, s.Runner.Deadline(p))
	defer cancel()
	// The prober going away ends the run: a server nobody will connect to
	// must not hold the device until the deadline.
	go func() {
		var ignored [1]byte
		_, _ = ss.r.Read(ignored[:])
		cancel()
	}()
	srv, err := s.Runner.StartServer(ctx, p)
	if err != nil {
		ss.refuse(kindOf(err), "%v", err)
		return
	}
	if err := srv.WaitListening(ctx, s.Runner.ListenTimeout()); err != nil {
		srv.Wait(ctx)
		ss.refuse(kindOf(err), "%v", err)
		return
	}
	ss.log.Info("responder: perftest server started", "device", d.Name, "port", port)
	if err := ss.reply(Response{OK: true, Port: port}); err != nil {
		srv.Kill()
		srv.Wait(ctx)
		return
	}
	out := srv.Wait(ctx)
	done := Response{Done: true, OK: out.Err == nil, ExitCode: out.Exit.Code, CPUNanos: int64(out.CPU)}
	if out.Err != nil {
		done.Kind, done.Error = kindOf(out.Err), out.Err.Error()
	}
	_ = ss.reply(done)
}

func kindOf(err error) string {
	var e *perftest.Error
	if errors.As(err, &e) {
		return string(e.Kind)
	}
	return KindInvalid
}

// takePort reserves the first port of the range that this responder is not
// using and that the kernel lets us bind now.
func (s *Server) takePort() (int, func(), error) {
	s.portsMu.Lock()
	defer s.portsMu.Unlock()
	if s.ports == nil {
		s.ports = map[int]bool{}
	}
	for p := s.PortLo; p <= s.PortHi; p++ {
		if s.ports[p] {
			continue
		}
		l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		s.ports[p] = true
		return p, func() {
			s.portsMu.Lock()
			delete(s.ports, p)
			s.portsMu.Unlock()
		}, nil
	}
	return 0, nil, fmt.Errorf("no free port in probe.responder.perftest_ports %d-%d", s.PortLo, s.PortHi)
}
