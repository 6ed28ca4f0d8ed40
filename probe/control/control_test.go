// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest/perftesttest"
)

var secret = []byte("0123456789abcdef-test-secret")

type env struct {
	addr   string
	srv    *Server
	fake   perftesttest.Dir
	runner *perftest.Runner
	cancel context.CancelFunc
	done   chan error
}

// start runs a responder on 127.0.0.1 with a fake perftest. mutate edits
// the config before the server is built.
func start(t *testing.T, script map[string]perftesttest.Sides, mutate func(*config.Probe)) *env {
	t.Helper()
	return startServer(t, script, mutate, nil)
}

// startServer is start with edit applied to the built server before it
// serves.
func startServer(t *testing.T, script map[string]perftesttest.Sides, mutate func(*config.Probe), edit func(*Server)) *env {
	t.Helper()
	fake := perftesttest.Install(t, script)
	p := &config.Probe{
		SecretFile: "unused",
		Responder: config.ProbeResponder{
			Enabled:       true,
			Listen:        []string{"127.0.0.1:0"},
			AllowedTests:  []string{"ib_write_lat", "ib_write_bw", "tcp_lat", "tcp_bw"},
			Devices:       []config.ProbeDevice{{Device: "mlx5_0", Port: 1}, {Device: "mlx5_1", Port: 1}},
			PerftestPorts: "20515-20530",
			MaxDuration:   model.Duration(30 * time.Second),
		},
	}
	if mutate != nil {
		mutate(p)
	}
	runner := &perftest.Runner{Dir: string(fake), Proc: hostfs.Dir("/proc"), Locks: &perftest.DeviceLocks{},
		Setup: 3 * time.Second, ListenWait: 2 * time.Second}
	srv, err := NewServer(p, secret, runner, nil)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &env{addr: ln.Addr().String(), srv: srv, fake: fake, runner: runner, cancel: cancel, done: make(chan error, 1)}
	go func() { e.done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-e.done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return e
}

func client() *Client { return &Client{Secret: secret} }

func TestTCPThroughResponder(t *testing.T) {
	e := start(t, nil, nil)
	ctx := context.Background()
	res, err := client().TCP(ctx, e.addr, Request{Test: "tcp_lat", Iterations: 500})
	if err != nil {
		t.Fatal(err)
	}
	if res.Latency == nil || res.Latency.Samples != 500 || res.Latency.Typical <= 0 {
		t.Errorf("latency %+v", res.Latency)
	}
	res, err = client().TCP(ctx, e.addr, Request{Test: "tcp_bw", Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Bandwidth == nil || res.Bandwidth.BytesPerSecond <= 0 || res.Bandwidth.CPU.ServerSeconds <= 0 {
		t.Errorf("bandwidth %+v", res.Bandwidth)
	}
}

// TestPerftestThroughResponder: the responder starts the fake server with
// its own device and the prober's settings; the local client connects to
// the port it names; the responder reports how its server ended.
func TestPerftestThroughResponder(t *testing.T) {
	sample := "ib_write_lat_rdma_cm_roce_v4.4-24.07.txt"
	e := start(t, map[string]perftesttest.Sides{"ib_write_lat": {
		Server: perftesttest.Behaviour{StdoutFile: sample, Protocol: true},
		Client: perftesttest.Behaviour{StdoutFile: sample, Protocol: true},
	}}, nil)
	ctx := context.Background()
	remote, err := client().StartPerftest(ctx, e.addr, Request{Test: "ib_write_lat", Device: "mlx5_1", Size: 2, Iterations: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if remote.Port < 20515 || remote.Port > 20530 {
		t.Errorf("port %d outside the configured range", remote.Port)
	}
	run := e.runner.Client(ctx, perftest.Params{Test: perftest.WriteLat, Device: "mlx5_0", Size: 2, Iterations: 1000, TCPPort: remote.Port}, "127.0.0.1")
	if run.Err != nil {
		t.Fatal(run.Err)
	}
	done, err := remote.Finish(5 * time.Second)
	if err != nil || !done.Done || !done.OK {
		t.Fatalf("final report %+v, %v", done, err)
	}
	calls := e.fake.Calls(t)
	if len(calls) != 2 || calls[0].Side != "server" {
		t.Fatalf("calls %+v", calls)
	}
	want := []string{"-F", "-d", "mlx5_1", "-i", "1", "-s", "2", "-n", "1000", "-p", itoa(remote.Port)}
	if strings.Join(calls[0].Args, " ") != strings.Join(want, " ") {
		t.Errorf("server argv %q, want %q", calls[0].Args, want)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestResponderRefuses: every refusal names its reason and starts nothing.
func TestResponderRefuses(t *testing.T) {
	e := start(t, map[string]perftesttest.Sides{"ib_write_lat": {}, "ib_write_bw": {}}, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cl   *Client
		req  Request
		kind string
	}{
		{"wrong secret", &Client{Secret: []byte("another-secret-of-16+")}, Request{Test: "ib_write_lat"}, KindUnauthorized},
		{"test not allowed", client(), Request{Test: "ib_send_lat"}, KindForbidden},
		{"unknown test", client(), Request{Test: "ib_fast_lat"}, KindForbidden},
		{"device not offered", client(), Request{Test: "ib_write_lat", Device: "mlx5_7"}, KindForbidden},
		{"size out of range", client(), Request{Test: "ib_write_lat", Size: 1 << 30}, KindInvalid},
		{"latency in duration mode", client(), Request{Test: "ib_write_lat", Duration: 10 * time.Second}, KindInvalid},
		{"longer than max_duration", client(), Request{Test: "ib_write_bw", Duration: 60 * time.Second}, KindInvalid},
		{"too many iterations for max_duration", client(), Request{Test: "ib_write_lat", Iterations: 10_000_000}, KindInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cl.StartPerftest(ctx, e.addr, tc.req)
			var re *RemoteError
			if !errors.As(err, &re) || re.Kind != tc.kind {
				t.Fatalf("got %v, want a %s refusal", err, tc.kind)
			}
			if re.Msg == "" {
				t.Error("refusal without a reason")
			}
		})
	}
	if _, err := client().TCP(ctx, e.addr, Request{Test: "tcp_bw", Duration: time.Hour}); err == nil {
		t.Error("an hour-long TCP stream was accepted")
	}
	if c := e.fake.Calls(t); len(c) != 0 {
		t.Errorf("refused requests started %d processes", len(c))
	}
}

func TestResponderAllowedClients(t *testing.T) {
	e := start(t, nil, func(p *config.Probe) { p.Responder.AllowedClients = []string{"192.0.2.0/24"} })
	_, err := client().TCP(context.Background(), e.addr, Request{Test: "tcp_lat"})
	var re *RemoteError
	if !errors.As(err, &re) || re.Kind != KindForbidden {
		t.Errorf("client outside allowed_clients: %v", err)
	}
}

// TestFakeResponder: an answer without our secret is rejected, so a fake
// responder cannot feed a prober made-up ports or results.
func TestFakeResponder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		_ = writeLine(c, Hello{V: Version, Challenge: randomHex()})
		var env envelope
		_ = readLine(r, &env)
		body, _ := json.Marshal(Response{OK: true, Port: 18515})
		_ = writeLine(c, envelope{Body: body, MAC: mac([]byte("not-the-secret-at-all"), responseDomain, "x", body)})
	}()
	if _, err := client().StartPerftest(context.Background(), ln.Addr().String(), Request{Test: "ib_write_lat"}); !errors.Is(err, ErrBadResponder) {
		t.Errorf("forged answer: %v", err)
	}
}

// TestReplay: a recorded request is useless on a new connection.
func TestReplay(t *testing.T) {
	e := start(t, nil, nil)
	// Record one authenticated request.
	c1, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	r1 := bufio.NewReader(c1)
	var hello Hello
	if err := readLine(r1, &hello); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(Request{Nonce: randomHex(), Test: "tcp_lat"})
	recorded := envelope{Body: body, MAC: mac(secret, requestDomain, hello.Challenge, body)}
	c1.Close()
	// Replay it.
	c2, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	r2 := bufio.NewReader(c2)
	if err := readLine(r2, &hello); err != nil {
		t.Fatal(err)
	}
	if err := writeLine(c2, recorded); err != nil {
		t.Fatal(err)
	}
	var got envelope
	if err := readLine(r2, &got); err != nil {
		t.Fatal(err)
	}
	var resp Response
	_ = json.Unmarshal(got.Body, &resp)
	if resp.OK || resp.Kind != KindUnauthorized {
		t.Errorf("replayed request: %+v", resp)
	}
}

// TestProberGoesAway: closing the session kills the perftest server at
// once, not at the deadline.
func TestProberGoesAway(t *testing.T) {
	e := start(t, map[string]perftesttest.Sides{"ib_write_bw": {
		Server: perftesttest.Behaviour{Protocol: true, Mode: "hang"},
	}}, nil)
	remote, err := client().StartPerftest(context.Background(), e.addr, Request{Test: "ib_write_bw", Duration: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	calls := e.fake.Calls(t)
	if len(calls) != 1 {
		t.Fatalf("calls %+v", calls)
	}
	remote.Close()
	if !perftesttest.WaitGone(calls[0].Pid) {
		t.Errorf("server %d still runs after the prober left", calls[0].Pid)
	}
}

func TestResponderBusyAndServerErrors(t *testing.T) {
	e := start(t, map[string]perftesttest.Sides{"ib_write_lat": {
		Server: perftesttest.Behaviour{StderrFile: "error_port_down_lsgunth_perftest_issue1.txt", Exit: 1},
	}}, nil)
	ctx := context.Background()
	// The server's own failure comes back typed.
	_, err := client().StartPerftest(ctx, e.addr, Request{Test: "ib_write_lat"})
	var re *RemoteError
	if !errors.As(err, &re) || re.Kind != string(perftest.PortDown) {
		t.Errorf("server failure: %v", err)
	}
	// A device held by a local probe is busy (after the responder's
	// wait, shortened here by holding it only briefly is not possible:
	// the wait is 5 s).
	release, err := e.runner.AcquireDevices(ctx, "mlx5_0")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	_, err = client().StartPerftest(ctx, e.addr, Request{Test: "ib_write_lat"})
	if !errors.As(err, &re) || re.Kind != KindBusy {
		t.Errorf("busy device: %v", err)
	}
}

func TestLoadSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	s, warn, err := LoadSecret(write("ok", "  c2VjcmV0LXNlY3JldC1zZWNyZXQ=\n", 0o600))
	if err != nil || warn != "" || string(s) != "c2VjcmV0LXNlY3JldC1zZWNyZXQ=" {
		t.Errorf("%q %q %v", s, warn, err)
	}
	if _, warn, err := LoadSecret(write("open", "0123456789abcdef", 0o644)); err != nil || !strings.Contains(warn, "chmod 600") {
		t.Errorf("world-readable: %q %v", warn, err)
	}
	if _, _, err := LoadSecret(write("short", "short\n", 0o600)); err == nil {
		t.Error("short secret accepted")
	}
	if _, _, err := LoadSecret(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file accepted")
	}
	if _, _, err := LoadSecret(""); err == nil {
		t.Error("no path accepted")
	}
}

// FuzzRequest feeds arbitrary request lines, with and without a valid MAC,
// to the responder's decoding: no panic, and nothing but a well-formed,
// authenticated request with a nonce is accepted.
func FuzzRequest(f *testing.F) {
	challenge := randomHex()
	for _, body := range []string{
		`{"nonce":"` + randomHex() + `","test":"ib_write_lat","size":2,"iterations":1000}`,
		`{"nonce":"` + randomHex() + `","test":"tcp_bw","duration":3000000000}`,
		`{"nonce":"x","test":"ib_write_lat"}`,
		`{"test":"ib_write_lat","extra":1}`,
		`[]`, `null`, ``,
	} {
		line, _ := json.Marshal(envelope{Body: json.RawMessage(body), MAC: mac(secret, requestDomain, challenge, []byte(body))})
		f.Add(line, true)
		f.Add(line, false)
	}
	f.Fuzz(func(t *testing.T, line []byte, sign bool) {
		var env envelope
		if err := readLine(bufio.NewReader(bytes.NewReader(append(line, '\n'))), &env); err != nil {
			return
		}
		if sign {
			env.MAC = mac(secret, requestDomain, challenge, env.Body)
		}
		req, kind, err := decodeRequest(secret, challenge, env)
		if err != nil {
			if kind == "" {
				t.Fatalf("refusal without a kind: %v", err)
			}
			return
		}
		if !sign && !verify(secret, requestDomain, challenge, env) {
			t.Fatal("accepted without a valid MAC")
		}
		if len(req.Nonce) < 32 {
			t.Fatalf("accepted without a nonce: %+v", req)
		}
	})
}
