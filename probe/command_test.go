// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest/perftesttest"
)

// command is a Command with the flags' defaults.
func command() *Command {
	return &Command{Test: "ib_write_lat", GID: -1, PeerGID: -1, Format: "table", TCPIterations: 10000, TCPDuration: 3 * time.Second}
}

func TestCommandTarget(t *testing.T) {
	cfg := &config.Probe{
		Loopback: []config.ProbeLoopback{{Device: "mlx5_0", Port: 1}, {Device: "mlx5_2", Port: 1, Name: "cable", PeerDevice: "mlx5_3"}},
		Peers:    []config.ProbePeer{{Name: "node2", Address: "10.0.0.2:9874", Device: "mlx5_1", Port: 1}},
	}
	for _, tc := range []struct {
		name  string
		flags func(c *Command)
		peer  string
		want  Target // the fields compared: Name, Mode, Device, Port, PeerDevice, PeerPort, Address, RemoteDevice, GID indexes
		err   string // substring; "" no error
	}{
		{name: "default: the first configured loopback", peer: "",
			want: Target{Name: "loopback", Mode: ModeLoopback, Device: "mlx5_0", Port: 1, PeerDevice: "mlx5_0", PeerPort: 1}},
		{name: "loopback by name", peer: "loopback",
			want: Target{Name: "loopback", Mode: ModeLoopback, Device: "mlx5_0", Port: 1, PeerDevice: "mlx5_0", PeerPort: 1}},
		{name: "--device picks the configured loopback of that device", flags: func(c *Command) { c.Device = "mlx5_2" },
			want: Target{Name: "cable", Mode: ModeLoopbackCable, Device: "mlx5_2", Port: 1, PeerDevice: "mlx5_3", PeerPort: 1}},
		{name: "--peer-device crosses the cable", flags: func(c *Command) { c.Device, c.PeerDevice, c.PeerPort = "mlx5_9", "mlx5_8", 2 },
			want: Target{Name: "loopback:mlx5_8/2", Mode: ModeLoopbackCable, Device: "mlx5_9", Port: 1, PeerDevice: "mlx5_8", PeerPort: 2}},
		{name: "--gid-index applies to both sides", flags: func(c *Command) { c.GID = 3 },
			want: Target{Name: "loopback", Mode: ModeLoopback, Device: "mlx5_0", Port: 1, PeerDevice: "mlx5_0", PeerPort: 1, GIDIndex: intp(3), PeerGIDIndex: intp(3)}},
		{name: "--peer-gid-index", flags: func(c *Command) { c.GID, c.PeerGID = 3, 5 },
			want: Target{Name: "loopback", Mode: ModeLoopback, Device: "mlx5_0", Port: 1, PeerDevice: "mlx5_0", PeerPort: 1, GIDIndex: intp(3), PeerGIDIndex: intp(5)}},
		{name: "configured peer", peer: "node2",
			want: Target{Name: "node2", Mode: ModePeer, Device: "mlx5_1", Port: 1, Address: "10.0.0.2:9874"}},
		{name: "configured peer, --remote-device and --port", peer: "node2", flags: func(c *Command) { c.RemoteDevice, c.Port = "mlx5_4", 2 },
			want: Target{Name: "node2", Mode: ModePeer, Device: "mlx5_1", Port: 2, Address: "10.0.0.2:9874", RemoteDevice: "mlx5_4"}},
		{name: "HOST gets the default responder port", peer: "node9.example",
			want: Target{Name: "node9.example", Mode: ModePeer, Port: 1, Address: "node9.example:" + DefaultResponderPort}},
		{name: "HOST:PORT", peer: "10.1.2.3:7000",
			want: Target{Name: "10.1.2.3", Mode: ModePeer, Port: 1, Address: "10.1.2.3:7000"}},
		{name: "[IPv6]:PORT", peer: "[fe80::1]:7000",
			want: Target{Name: "fe80::1", Mode: ModePeer, Port: 1, Address: "[fe80::1]:7000"}},
		{name: "bad host", peer: "bad host", err: "neither a configured peer nor a host name or address"},
		{name: "option as host", peer: "-x", err: "neither a configured peer"},
		{name: "port 0", peer: "node9:0", err: "bad port"},
		{name: "port too big", peer: "node9:65536", err: "bad port"},
		{name: "port not a number", peer: "node9:http", err: "bad port"},
		{name: "bad --remote-device", peer: "node2", flags: func(c *Command) { c.RemoteDevice = "-d" }, err: `--remote-device "-d"`},
		{name: "bad --device", flags: func(c *Command) { c.Device = "-d" }, err: `device "-d": not an RDMA device name`},
		{name: "bad --peer-device", flags: func(c *Command) { c.PeerDevice = "../x" }, err: `device "../x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := command()
			if tc.flags != nil {
				tc.flags(c)
			}
			got, err := c.target(cfg, tc.peer)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w := tc.want
			if got.Name != w.Name || got.Mode != w.Mode || got.Device != w.Device || got.Port != w.Port || got.PeerDevice != w.PeerDevice ||
				got.PeerPort != w.PeerPort || got.Address != w.Address || got.RemoteDevice != w.RemoteDevice ||
				!sameInt(got.GIDIndex, w.GIDIndex) || !sameInt(got.PeerGIDIndex, w.PeerGIDIndex) {
				t.Errorf("target %+v\nwant   %+v", *got, w)
			}
		})
	}
}

func sameInt(a, b *int) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

// Bad input is refused with exit code 2 before anything starts: the fake
// perftest is never called.
func TestCommandUsageRefusedBeforeStart(t *testing.T) {
	fake := perftesttest.Install(t, replay())
	cfg := &config.Probe{Loopback: []config.ProbeLoopback{{Device: "mlx5_0", Port: 1}}}
	for _, tc := range []struct {
		flags func(c *Command)
		err   string
	}{
		{func(c *Command) { c.Test = "ib_fast_bw" }, "probe: "},
		{func(c *Command) { c.Peer = "bad host" }, "probe: --peer"},
		{func(c *Command) { c.Size = 99999999 }, "probe: "},
		{func(c *Command) { c.Size = -1 }, "must not be negative"},
		{func(c *Command) { c.Test, c.Duration = "ib_send_lat", 10*time.Second }, "is a latency test; use --iterations"},
		{func(c *Command) { c.Test, c.Duration = "ib_write_bw", 2*time.Second }, "probe: "},
		{func(c *Command) { c.Compare = "loopback" }, "probe --compare: the comparison needs a peer"},
		{func(c *Command) { c.Compare = "node9" }, "probe --compare: no secret"},
		{func(c *Command) { c.Compare, c.CompareIPoIB = "node9", "node9" }, `--compare.ipoib-address "node9": want HOST:PORT`},
		{func(c *Command) { c.Compare, c.CompareEthernet = "node9", "-x:1" }, `--compare.ethernet-address "-x:1"`},
	} {
		c := command()
		tc.flags(c)
		var out bytes.Buffer
		code, err := c.Run(context.Background(), func(string) (*Prober, error) {
			p := newProber(t, fake, cfg)
			if c.CompareIPoIB == "" && c.CompareEthernet == "" {
				p.Client = nil // the secret is what the "no secret" case lacks
			}
			return p, nil
		}, &out)
		if code != ExitUsage || err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: exit %d, %v; want %d and %q", c, code, err, ExitUsage, tc.err)
		}
		if out.Len() > 0 {
			t.Errorf("%+v: printed %q", c, out.String())
		}
	}
	c := command()
	code, err := c.Run(context.Background(), func(string) (*Prober, error) {
		return nil, errors.New("secret file /etc/x: permission denied")
	}, &bytes.Buffer{})
	if code != ExitUsage || err == nil || err.Error() != "probe: secret file /etc/x: permission denied" {
		t.Errorf("prober not built: exit %d, %v", code, err)
	}
	if n := len(fake.Calls(t)); n != 0 {
		t.Errorf("bad input started %d perftest processes", n)
	}
}

// A run prints a table or JSON, and exits 0 on success, 1 on a failed run.
func TestCommandRunOutputAndExit(t *testing.T) {
	script := replay()
	script["ib_write_lat"] = perftesttest.Sides{Server: perftesttest.Behaviour{StderrFile: "error_port_down_lsgunth_perftest_issue1.txt", Exit: 1}}
	fake := perftesttest.Install(t, script)
	cfg := &config.Probe{Loopback: []config.ProbeLoopback{{Device: "mlx5_0", Port: 1}}}
	run := func(c *Command) (int, string) {
		t.Helper()
		var out bytes.Buffer
		code, err := c.Run(context.Background(), func(string) (*Prober, error) { return newProber(t, fake, cfg), nil }, &out)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		return code, out.String()
	}

	c := command()
	c.Test = "ib_send_lat"
	code, out := run(c)
	for _, want := range []string{"peer       loopback (loopback, mlx5_0/1 -> mlx5_0/1)", "test       ib_send_lat", "typical 1.27 µs", "p99.9 5.19 µs"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if code != ExitOK {
		t.Errorf("exit %d, want %d", code, ExitOK)
	}

	c = command()
	c.Test, c.Format = "ib_write_bw", "json"
	code, out = run(c)
	var res Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != ExitOK || !res.Success || res.Bandwidth == nil || !near(res.Bandwidth.Average, 392.34e9/8) {
		t.Errorf("exit %d, %v: %s", code, err, out)
	}

	c = command() // ib_write_lat: the server finds the port down
	code, out = run(c)
	if code != ExitFailed || !strings.Contains(out, "result     FAILED after") || !strings.Contains(out, "port_down") {
		t.Errorf("exit %d, want %d:\n%s", code, ExitFailed, out)
	}
}

func TestWriteResult(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Result
		want string
	}{
		{"peer bandwidth", Result{Peer: "node2", Mode: ModePeer, Device: "mlx5_1", Port: 1, PeerDevice: "mlx5_4", Test: "ib_write_bw",
			Success: true, Duration: 5 * time.Second, Size: 65536, Iterations: 1000, PortRate: 50e9,
			Bandwidth: &Bandwidth{Average: 392.34e9 / 8, Peak: 395e9 / 8, PeakMeasured: true}, ClientCPU: time.Second, ServerCPU: 2 * time.Second,
			Notes: []string{"a note"}},
			"peer       node2 (peer, mlx5_1/1 -> node2 mlx5_4)\n" +
				"test       ib_write_bw\n" +
				"result     ok in 5.00 s, 65536 bytes x 1000 iterations\n" +
				"bandwidth  average 392.34 Gb/s  peak 395.00 Gb/s  (98.1 % of the port's 400.00 Gb/s)\n" +
				"cpu        client 1.00 s, server 2.00 s\n" +
				"note       a note\n"},
		{"failed loopback", Result{Peer: "loopback:mlx5_1/1", Mode: ModeLoopbackCable, Device: "mlx5_0", Port: 1, PeerDevice: "mlx5_1", PeerPort: 1,
			Test: "ib_send_lat", Duration: 1500 * time.Millisecond, ErrorKind: "port_down", Error: "line one\nline two",
			GPU: &GPUUse{Index: 2, Address: "0000:1b:00.0"}},
			"peer       loopback:mlx5_1/1 (loopback-cable, mlx5_0/1 -> mlx5_1/1)\n" +
				"test       ib_send_lat\n" +
				"memory     GPU2 0000:1b:00.0 (unknown to mlx5_0)\n" +
				"result     FAILED after 1.50 s: port_down\n" +
				"error      line one\n" +
				"           line two\n"},
	} {
		var b bytes.Buffer
		WriteResult(&b, &tc.r)
		if b.String() != tc.want {
			t.Errorf("%s:\n%s\nwant\n%s", tc.name, b.String(), tc.want)
		}
	}
}
