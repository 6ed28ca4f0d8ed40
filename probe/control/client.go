// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/rdma-doctor/rdma_doctor/probe/tcpprobe"
)

// Client talks to responders.
type Client struct {
	Secret []byte
	// Netdev binds every connection to a network device
	// (SO_BINDTODEVICE, needs CAP_NET_RAW); empty: the routing table
	// decides.
	Netdev string
	// Source is the local address to connect from; empty: any.
	Source string
}

// ErrBadResponder means the responder's answer failed authentication: it
// does not hold our secret.
var ErrBadResponder = errors.New("responder's answer failed authentication (different probe.secret_file?)")

// greetingTimeout bounds the wait for the responder's greeting, which it
// sends as soon as it accepts; longer than the responder's own handshake
// timeout, so a slow network is the responder's call to make.
const greetingTimeout = 10 * time.Second

// conn is an authenticated session.
type conn struct {
	c     net.Conn
	r     *bufio.Reader
	nonce string
	key   []byte
}

func (cl *Client) dial(ctx context.Context, address string) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	if cl.Source != "" {
		ip := net.ParseIP(cl.Source)
		if ip == nil {
			return nil, fmt.Errorf("source address %q is not an IP address", cl.Source)
		}
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	if cl.Netdev != "" {
		dev := cl.Netdev
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptString(int(fd), syscall.SOL_SOCKET, syscall.SO_BINDTODEVICE, dev)
			}); err != nil {
				return err
			}
			if serr != nil {
				return fmt.Errorf("bind to netdev %s: %w", dev, serr)
			}
			return nil
		}
	}
	c, err := d.DialContext(ctx, "tcp", address)
	if err != nil {
		return nil, fmt.Errorf("responder %s: %w", address, err)
	}
	return c, nil
}

// open dials, authenticates req and reads the first answer.
func (cl *Client) open(ctx context.Context, address string, req Request) (*conn, Response, error) {
	if len(cl.Secret) < MinSecretLen {
		return nil, Response{}, errors.New("control: no probe secret")
	}
	c, err := cl.dial(ctx, address)
	if err != nil {
		return nil, Response{}, err
	}
	cn := &conn{c: c, r: bufio.NewReader(c), key: cl.Secret}
	fail := func(err error) (*conn, Response, error) {
		c.Close()
		return nil, Response{}, err
	}
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	_ = c.SetReadDeadline(time.Now().Add(greetingTimeout))
	// The greeting, or a refusal sent instead of it (address not
	// allowed).
	var hello struct {
		Hello
		Body json.RawMessage `json:"body"`
	}
	if err := readLine(cn.r, &hello); err != nil {
		return fail(fmt.Errorf("responder %s: no greeting: %w", address, err))
	}
	if len(hello.Body) > 0 {
		var resp Response
		_ = json.Unmarshal(hello.Body, &resp)
		return fail(&RemoteError{Kind: resp.Kind, Msg: resp.Error})
	}
	if hello.V != Version || len(hello.Challenge) < 32 {
		return fail(fmt.Errorf("responder %s: unexpected greeting (protocol version %d; not an rdma_doctor responder?)", address, hello.V))
	}
	req.Nonce = randomHex()
	cn.nonce = req.Nonce
	body, err := json.Marshal(req)
	if err != nil {
		return fail(err)
	}
	if err := writeLine(c, envelope{Body: body, MAC: mac(cl.Secret, requestDomain, hello.Challenge, body)}); err != nil {
		return fail(fmt.Errorf("responder %s: %w", address, err))
	}
	resp, err := cn.read()
	if err != nil {
		return fail(fmt.Errorf("responder %s: %w", address, err))
	}
	if !resp.OK {
		return fail(&RemoteError{Kind: resp.Kind, Msg: resp.Error})
	}
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	} else {
		_ = c.SetDeadline(time.Time{})
	}
	return cn, resp, nil
}

// read reads one authenticated response. An unauthenticated refusal (bad
// MAC on our side, client not allowed) is reported as such.
func (cn *conn) read() (Response, error) {
	var env envelope
	if err := readLine(cn.r, &env); err != nil {
		return Response{}, err
	}
	var resp Response
	if err := json.Unmarshal(env.Body, &resp); err != nil {
		return Response{}, fmt.Errorf("control: %w", err)
	}
	if env.MAC == "" && !resp.OK && (resp.Kind == KindUnauthorized || resp.Kind == KindForbidden || resp.Kind == KindProtocol) {
		return Response{}, &RemoteError{Kind: resp.Kind, Msg: resp.Error}
	}
	if !verify(cn.key, responseDomain, cn.nonce, env) {
		return Response{}, ErrBadResponder
	}
	return resp, nil
}

// Remote is a perftest server a responder started for us.
type Remote struct {
	// Port is where it listens.
	Port int
	cn   *conn
}

// StartPerftest asks the responder at address to start the server side of
// req and returns once it listens.
func (cl *Client) StartPerftest(ctx context.Context, address string, req Request) (*Remote, error) {
	cn, resp, err := cl.open(ctx, address, req)
	if err != nil {
		return nil, err
	}
	if resp.Port <= 0 {
		cn.c.Close()
		return nil, fmt.Errorf("responder %s: no port in its answer", address)
	}
	return &Remote{Port: resp.Port, cn: cn}, nil
}

// Finish waits (at most wait) for the responder's report of how its
// server ended, then closes the session. A nil Response means no report.
func (r *Remote) Finish(wait time.Duration) (*Response, error) {
	defer r.cn.c.Close()
	_ = r.cn.c.SetReadDeadline(time.Now().Add(wait))
	resp, err := r.cn.read()
	if err != nil {
		return nil, err
	}
	return &resp, nil
}

// Close ends the session at once; the responder kills its server.
func (r *Remote) Close() { r.cn.c.Close() }

// TCPResult is one TCP probe run.
type TCPResult struct {
	Latency   *tcpprobe.Latency
	Bandwidth *tcpprobe.Bandwidth
}

// TCP runs the TCP transport probe against the responder at address over
// the same connection: test tcp_lat or tcp_bw.
func (cl *Client) TCP(ctx context.Context, address string, req Request) (*TCPResult, error) {
	tr := TCPRequest(req)
	if err := tr.Validate(0); err != nil {
		return nil, err
	}
	cn, _, err := cl.open(ctx, address, req)
	if err != nil {
		return nil, err
	}
	defer cn.c.Close()
	if tr.Mode == tcpprobe.ModeLatency {
		l, err := tcpprobe.RunLatency(ctx, cn.c, cn.r, tr)
		if err != nil {
			return nil, err
		}
		return &TCPResult{Latency: l}, nil
	}
	b, err := tcpprobe.RunBandwidth(ctx, cn.c, cn.r, tr)
	if err != nil {
		return nil, err
	}
	return &TCPResult{Bandwidth: b}, nil
}
