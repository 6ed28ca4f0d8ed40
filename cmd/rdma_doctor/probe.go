// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"os"

	"github.com/alecthomas/kingpin/v2"

	"github.com/rdma-doctor/rdma_doctor/internal/read/gpu"
	"github.com/rdma-doctor/rdma_doctor/probe"
	"github.com/rdma-doctor/rdma_doctor/probe/control"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest"
)

func setupProbe(cmd *kingpin.CmdClause) func(context.Context, *App) int {
	f := &probe.Command{}
	cmd.Flag("test", "perftest test: ib_write_lat, ib_read_lat, ib_send_lat, ib_write_bw, ib_read_bw, ib_send_bw.").Default("ib_write_lat").StringVar(&f.Test)
	cmd.Flag("peer", "A peer from probe.peers, or HOST[:PORT] of a responder. Default: loopback on this host.").PlaceHolder("PEER").StringVar(&f.Peer)
	cmd.Flag("device", "Local RDMA device (default: the config target's).").PlaceHolder("DEVICE").StringVar(&f.Device)
	cmd.Flag("port", "Local HCA port.").Default("0").IntVar(&f.Port)
	cmd.Flag("gid-index", "Local GID index (-x), for RoCE; -1: perftest's choice.").Default("-1").IntVar(&f.GID)
	cmd.Flag("peer-device", "Loopback: the server side's device (another local HCA: the traffic crosses the cable).").PlaceHolder("DEVICE").StringVar(&f.PeerDevice)
	cmd.Flag("peer-port", "Loopback: the server side's HCA port.").Default("0").IntVar(&f.PeerPort)
	cmd.Flag("peer-gid-index", "Loopback: the server side's GID index; -1: as --gid-index.").Default("-1").IntVar(&f.PeerGID)
	cmd.Flag("remote-device", "Peer: its device (one of its responder.devices).").StringVar(&f.RemoteDevice)
	cmd.Flag("size", "Message size in bytes (default: probe.latency / probe.bandwidth).").Default("0").IntVar(&f.Size)
	cmd.Flag("iterations", "Iterations (default: probe.latency / probe.bandwidth).").Default("0").IntVar(&f.Iterations)
	cmd.Flag("duration", "Bandwidth tests: run for this long instead of a count (5s..300s).").Default("0s").DurationVar(&f.Duration)
	cmd.Flag("format", "Output: table or json.").Default("table").EnumVar(&f.Format, "table", "json")
	cmd.Flag("secret-file", "Shared secret of the responders (default: probe.secret_file).").PlaceHolder("FILE").StringVar(&f.SecretFile)
	cmd.Flag("compare", "Print the guide's transport comparison (RDMA, IPoIB, Ethernet: latency, bandwidth, CPU) with this peer.").PlaceHolder("PEER").StringVar(&f.Compare)
	cmd.Flag("compare.ipoib-address", "The peer's responder over IPoIB, HOST:PORT (default: the peer's ipoib_address).").StringVar(&f.CompareIPoIB)
	cmd.Flag("compare.ethernet-address", "The peer's responder over Ethernet, HOST:PORT (default: the peer's ethernet_address).").StringVar(&f.CompareEthernet)
	cmd.Flag("compare.tcp-iterations", "TCP latency round trips.").Default("10000").IntVar(&f.TCPIterations)
	cmd.Flag("compare.tcp-duration", "TCP bandwidth stream length.").Default("3s").DurationVar(&f.TCPDuration)
	return func(ctx context.Context, a *App) int {
		code, err := f.Run(ctx, func(secretFile string) (*probe.Prober, error) { return newProber(a, secretFile) }, os.Stdout)
		if err != nil {
			errorf(os.Stderr, "%v", err)
		}
		return code
	}
}

// newProber builds the prober of the config's probe section. secretFile
// overrides probe.secret_file.
func newProber(a *App, secretFile string) (*probe.Prober, error) {
	cfg := &a.Config.Probe
	// A probe killed mid-run (SIGKILL, OOM) leaves its perftest work
	// directory; the next start removes those of processes that are gone.
	if n, err := perftest.RemoveStaleWorkDirs(); err != nil {
		a.Logger.Warn("removing perftest work directories of killed runs", "err", err)
	} else if n > 0 {
		a.Logger.Info("removed perftest work directories of killed runs", "count", n)
	}
	p := &probe.Prober{
		Runner: &perftest.Runner{Dir: cfg.PerftestDir, Proc: a.Host.FS().Proc, Logger: a.Logger.With("component", "perftest"), Reaper: a.Reaper},
		Sys:    a.Host.FS().Sys,
		Config: cfg,
		// probe.gpu targets find their GPU and its nearest HCA in the
		// host snapshot's GPU source (cached on the slow interval).
		GPUs:   func(ctx context.Context) (*gpu.Snapshot, error) { return a.Host.Snapshot().GPUs(ctx) },
		Logger: a.Logger.With("component", "probe"),
	}
	if secretFile == "" {
		secretFile = cfg.SecretFile
	}
	if secretFile != "" {
		secret, warning, err := control.LoadSecret(secretFile)
		if err != nil {
			return nil, err
		}
		if warning != "" {
			a.Logger.Warn(warning)
		}
		p.Client = &control.Client{Secret: secret}
	}
	return p, nil
}
