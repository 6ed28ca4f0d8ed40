// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/probe/control"
	"github.com/rdma-doctor/rdma_doctor/probe/perftest"
)

// Prober runs one test against one target.
type Prober struct {
	Runner *perftest.Runner
	// Client reaches peers' responders; nil when no secret is configured
	// (peers then fail as unauthorized).
	Client *control.Client
	// Sys is the sysfs the port rate is read from.
	Sys hostfs.FS
	// Config is the probe section (run settings, timeout).
	Config *config.Probe
	// GPUs finds the GPU of a probe.gpu target and its nearest HCA; nil
	// fails those targets as no_gpu.
	GPUs   GPUSource
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (p *Prober) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Prober) logger() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Run runs test against t and returns the result, good or bad. It never
// panics on bad output and always returns within the probe's deadline.
func (p *Prober) Run(ctx context.Context, t *Target, test perftest.Test) Result {
	params := Params(p.Config, test)
	res := Result{Peer: t.Name, Test: string(test), Mode: t.Mode, Device: t.Device, Port: t.Port, Memory: t.Memory.orHost(), Start: p.now()}
	if p.Config.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(p.Config.Timeout))
		defer cancel()
	}
	if res.Memory == MemoryGPU {
		// A GPU target is a loopback on one HCA port, both sides'
		// buffers in the GPU's memory.
		device, g, use, err := p.resolveGPU(ctx, t, test)
		res.GPU = use
		res.Device, res.PeerDevice, res.PeerPort = device, device, t.Port
		if err != nil {
			res.Duration = p.now().Sub(res.Start)
			res.ErrorKind, res.Error = errorKind(err), err.Error()
			p.logger().Info("probe failed", "peer", t.Name, "test", test, "gpu", t.GPU, "device", device, "kind", res.ErrorKind, "err", err)
			return res
		}
		params.GPU = g
		gt := *t
		gt.Device, gt.PeerDevice, gt.PeerPort, gt.PeerGIDIndex = device, device, t.Port, t.GIDIndex
		t = &gt
	}
	if test.Bandwidth() {
		res.PortRate = p.portRate(t.Device, t.Port)
	}
	var run *perftest.Run
	var err error
	switch t.Mode {
	case ModeLoopback, ModeLoopbackCable:
		res.PeerDevice, res.PeerPort = t.PeerDevice, t.PeerPort
		server, client := params, params
		server.Device, server.IBPort, server.GIDIndex = t.PeerDevice, t.PeerPort, t.PeerGIDIndex
		client.Device, client.IBPort, client.GIDIndex = t.Device, t.Port, t.GIDIndex
		run = p.Runner.Loopback(ctx, server, client)
		err = run.Err
	case ModePeer:
		res.PeerDevice = t.RemoteDevice
		run, err = p.runPeer(ctx, t, params)
	default:
		err = fmt.Errorf("unknown probe mode %q", t.Mode)
	}
	res.Duration = p.now().Sub(res.Start)
	if run != nil {
		if run.Client != nil {
			res.ClientCPU = run.Client.CPU
		}
		if run.Server != nil {
			res.ServerCPU = run.Server.CPU
		}
	}
	if err != nil {
		res.ErrorKind, res.Error = errorKind(err), err.Error()
		p.logger().Info("probe failed", "peer", t.Name, "test", test, "device", t.Device, "kind", res.ErrorKind, "err", err)
		return res
	}
	if err := fill(&res, run.Report, params); err != nil {
		res.ErrorKind, res.Error = string(perftest.BadOutput), err.Error()
		return res
	}
	res.Success = true
	p.logger().Debug("probe done", "peer", t.Name, "test", test, "device", t.Device, "duration", res.Duration)
	return res
}

// runPeer asks the peer's responder for the server side, then runs the
// client against it. When the client fails, the responder's account of
// its server often says why (the peer's port is down).
func (p *Prober) runPeer(ctx context.Context, t *Target, params perftest.Params) (*perftest.Run, error) {
	if p.Client == nil {
		return nil, &control.RemoteError{Kind: control.KindUnauthorized, Msg: "no probe.secret_file configured"}
	}
	req := control.Request{Test: string(params.Test), Device: t.RemoteDevice, Size: params.Size,
		Iterations: params.Iterations, Duration: params.Duration}
	ctx, cancel := context.WithTimeout(ctx, p.Runner.Deadline(params)+10*time.Second)
	defer cancel()
	remote, err := p.Client.StartPerftest(ctx, t.Address, req)
	if err != nil {
		return nil, err
	}
	params.Device, params.IBPort, params.GIDIndex, params.TCPPort = t.Device, t.Port, t.GIDIndex, remote.Port
	run := p.Runner.Client(ctx, params, t.PerftestHost)
	wait := 5 * time.Second
	if run.Err != nil {
		wait = time.Second
	}
	done, ferr := remote.Finish(wait)
	if done != nil && done.CPUNanos > 0 {
		run.Server = &perftest.Outcome{Side: "server", CPU: time.Duration(done.CPUNanos)}
	}
	if run.Err != nil {
		var ce *perftest.Error
		if errors.As(run.Err, &ce) && done != nil && !done.OK {
			switch ce.Kind {
			case perftest.ConnectFailed, perftest.ExchangeFailed, perftest.Timeout:
				if done.Kind != "" && done.Kind != string(perftest.Timeout) && done.Kind != string(perftest.ExchangeFailed) {
					return run, &control.RemoteError{Kind: done.Kind, Msg: "peer's perftest server: " + done.Error}
				}
			}
		}
		return run, run.Err
	}
	if ferr != nil {
		p.logger().Debug("probe: no final report from the responder", "peer", t.Name, "err", ferr)
	}
	return run, nil
}

// fill copies the report's row into the result.
func fill(res *Result, rep *perftest.Report, params perftest.Params) error {
	if rep == nil {
		return errors.New("no report")
	}
	res.Notes = rep.Notes
	size := int64(params.Size)
	if params.Test.Bandwidth() {
		row, ok := rep.BandwidthRow(size)
		if !ok {
			return fmt.Errorf("no bandwidth row for size %d", size)
		}
		res.Size, res.Iterations = row.Bytes, row.Iterations
		res.Bandwidth = &Bandwidth{Peak: row.PeakBytesPerSecond, PeakMeasured: row.PeakMeasured,
			Average: row.AvgBytesPerSecond, MessagesPerSecond: row.MessagesPerSecond}
		return nil
	}
	row, ok := rep.LatencyRow(size)
	if !ok {
		return fmt.Errorf("no latency row for size %d", size)
	}
	if row.Has&(perftest.ColTypical|perftest.ColMin|perftest.ColMax) != perftest.ColTypical|perftest.ColMin|perftest.ColMax {
		return errors.New("latency row without t_min, t_max and t_typical")
	}
	res.Size, res.Iterations = row.Bytes, row.Iterations
	res.Latency = &Latency{Min: row.Min, Typical: row.Typical, Avg: row.Avg, Max: row.Max, P99: row.P99, P999: row.P999,
		HasPercentiles: row.Has&perftest.ColP99 != 0 && row.Has&perftest.ColP999 != 0}
	return nil
}

// errorKind is the reason label of a failure.
func errorKind(err error) string {
	var pe *perftest.Error
	if errors.As(err, &pe) {
		return string(pe.Kind)
	}
	var ge *gpuError
	if errors.As(err, &ge) {
		return ge.kind
	}
	var re *control.RemoteError
	if errors.As(err, &re) && re.Kind != "" {
		return re.Kind
	}
	if errors.Is(err, control.ErrBadResponder) {
		return control.KindUnauthorized
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return string(perftest.Timeout)
	}
	if strings.Contains(err.Error(), "responder") {
		return "responder_unreachable"
	}
	return string(perftest.Failed)
}

// portRate reads the local port's active rate through the infiniband
// package's one parser of the rate file; 0 when it cannot be read.
func (p *Prober) portRate(device string, port int) float64 {
	if p.Sys == nil || device == "" {
		return 0
	}
	b, err := p.Sys.ReadFile(infiniband.ClassDir + "/" + device + "/ports/" + strconv.Itoa(port) + "/rate")
	if err != nil {
		return 0
	}
	r, err := infiniband.ParseRate(string(b))
	if err != nil {
		return 0
	}
	return r.BytesPerSecond()
}

func durationOf(d model.Duration) time.Duration { return time.Duration(d) }
