// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package perftest

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/names"
)

// Limits of the values a probe may ask for. They bound what a config file or
// a remote request can make this host do: perftest itself accepts sizes up
// to 2^31 and any iteration count.
const (
	MinSize       = 1
	MaxSize       = 8 << 20 // perftest -a stops at 2^23
	MinIterations = 5       // perftest's own minimum
	MaxIterations = 10_000_000
	// A bandwidth run in duration mode measures D - 2*margin seconds with a
	// 2 s margin: perftest rejects D <= 4.
	MinDuration = 5 * time.Second
	MaxDuration = 300 * time.Second
	MinTCPPort  = 1024
	MaxTCPPort  = 65535
	MaxIBPort   = 255
	MaxGIDIndex = 1023
)

// Params are the options both sides of one run get. perftest requires the
// same options on server and client (README "SAME OPTIONS"), except the
// device, port and GID index, which name each side's own HCA.
type Params struct {
	Test Test
	// Device is the RDMA device ("mlx5_0"); empty lets perftest take the
	// first one it finds.
	Device string
	// IBPort is the HCA port (-i); 0 means perftest's default, 1.
	IBPort int
	// GIDIndex (-x) is needed on RoCE unless perftest's own choice is
	// right; nil means not given.
	GIDIndex *int
	// Size is the message size in bytes (-s); 0 means perftest's default
	// (65536 for bandwidth, 2 for latency).
	Size int
	// Iterations (-n); 0 means perftest's default. Ignored when Duration
	// is set.
	Iterations int
	// Duration (-D) runs a bandwidth test for a time instead of a count.
	// Latency tests in duration mode print no percentiles, so they are
	// not allowed here.
	Duration time.Duration
	// TCPPort (-p) is the port of perftest's own TCP exchange; 0 means its
	// default, 18515.
	TCPPort int
	// GPU puts the buffers in a GPU's memory (--use_cuda); the zero value
	// is host memory.
	GPU GPU
}

// ValidDevice reports whether s is a plausible RDMA device name.
func ValidDevice(s string) bool { return names.Device(s) }

// Validate checks every field against the limits, so nothing odd reaches a
// command line.
func (p Params) Validate() error {
	if _, err := ParseTest(string(p.Test)); err != nil {
		return err
	}
	var errs []error
	if p.Device != "" && !ValidDevice(p.Device) {
		errs = append(errs, fmt.Errorf("device %q: not an RDMA device name", p.Device))
	}
	if p.IBPort < 0 || p.IBPort > MaxIBPort {
		errs = append(errs, fmt.Errorf("port %d: want 1..%d", p.IBPort, MaxIBPort))
	}
	if p.GIDIndex != nil && (*p.GIDIndex < 0 || *p.GIDIndex > MaxGIDIndex) {
		errs = append(errs, fmt.Errorf("gid_index %d: want 0..%d", *p.GIDIndex, MaxGIDIndex))
	}
	if p.Size != 0 && (p.Size < MinSize || p.Size > MaxSize) {
		errs = append(errs, fmt.Errorf("size %d: want %d..%d bytes", p.Size, MinSize, MaxSize))
	}
	if p.Iterations != 0 && (p.Iterations < MinIterations || p.Iterations > MaxIterations) {
		errs = append(errs, fmt.Errorf("iterations %d: want %d..%d", p.Iterations, MinIterations, MaxIterations))
	}
	if p.Duration != 0 {
		if !p.Test.Bandwidth() {
			errs = append(errs, fmt.Errorf("duration: %s is a latency test; perftest prints no percentiles in duration mode, use iterations", p.Test))
		} else if p.Duration < MinDuration || p.Duration > MaxDuration || p.Duration%time.Second != 0 {
			errs = append(errs, fmt.Errorf("duration %s: want whole seconds in %s..%s", p.Duration, MinDuration, MaxDuration))
		}
	}
	if p.TCPPort != 0 && (p.TCPPort < MinTCPPort || p.TCPPort > MaxTCPPort) {
		errs = append(errs, fmt.Errorf("tcp port %d: want %d..%d", p.TCPPort, MinTCPPort, MaxTCPPort))
	}
	if err := p.GPU.validate(p.Test); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ValidateHost accepts an IP address or a DNS host name, nothing else: the
// value becomes the last argument of a perftest client.
func ValidateHost(h string) error {
	if err := names.Host(h); err != nil {
		return fmt.Errorf("peer %w", err)
	}
	return nil
}

// Args builds the argument list (without the program name). host is empty
// for the server and the server's address for the client. Every run gets
// -F (the CPU-frequency warning changes nothing measured) and
// --report_gbits (one unit to parse; MiB/sec is parsed as well).
func (p Params) Args(host string) ([]string, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if host != "" {
		if err := ValidateHost(host); err != nil {
			return nil, err
		}
	}
	args := []string{"-F"}
	if p.Test.Bandwidth() {
		args = append(args, "--report_gbits")
	}
	if p.Device != "" {
		args = append(args, "-d", p.Device)
	}
	if p.IBPort > 0 {
		args = append(args, "-i", strconv.Itoa(p.IBPort))
	}
	if p.GIDIndex != nil {
		args = append(args, "-x", strconv.Itoa(*p.GIDIndex))
	}
	if p.Size > 0 {
		args = append(args, "-s", strconv.Itoa(p.Size))
	}
	switch {
	case p.Duration > 0:
		args = append(args, "-D", strconv.Itoa(int(p.Duration/time.Second)))
	case p.Iterations > 0:
		args = append(args, "-n", strconv.Itoa(p.Iterations))
		// Peak bandwidth is not computed above 20000 iterations and
		// perftest warns; -N says so up front.
		if p.Test.Bandwidth() && p.Iterations > 20000 {
			args = append(args, "-N")
		}
	}
	if p.TCPPort > 0 {
		args = append(args, "-p", strconv.Itoa(p.TCPPort))
	}
	args = append(args, p.GPU.args()...)
	if host != "" {
		args = append(args, host)
	}
	return args, nil
}

// env is what the run adds to the runner's minimal environment.
func (p Params) env() []string {
	if p.GPU.Set {
		return cudaEnv
	}
	return nil
}

// Expected is how long the measurement itself should take, for the
// deadline: the duration, or an estimate from the iteration count with a
// floor of a second. perftest adds about a second of setup on each side.
func (p Params) Expected() time.Duration {
	if p.Duration > 0 {
		return p.Duration
	}
	n := p.Iterations
	if n == 0 {
		n = 5000
	}
	// 100 µs per iteration covers an 8 MiB message at 100 Gb/s (84 µs).
	d := time.Duration(n) * 100 * time.Microsecond
	if d < time.Second {
		d = time.Second
	}
	return d
}
