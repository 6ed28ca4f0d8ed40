// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package perftest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/pci"
)

// NoCUDA is the error kind of a GPU-memory probe whose perftest binary was
// built without CUDA: its --help lists no --use_cuda. perftest prints the
// CUDA options only when it was configured with CUDA_H_PATH
// (src/perftest_parameters.c, usage()); a distribution build (Debian's
// perftest, testdata/samples/ib_write_bw_help_debian_v4.5-0.17.txt) has none.
const NoCUDA ErrorKind = "no_cuda"

// CUDA is what a perftest binary's help says about GPU memory.
type CUDA struct {
	// Supported: --use_cuda=<cuda device id> is listed.
	Supported bool
	// BusID: --use_cuda_bus_id=<cuda full BUS id> is listed (perftest
	// 4.5 and later), so the GPU can be named by its PCI address instead
	// of CUDA's own numbering.
	BusID bool
	// DMABuf: --use_cuda_dmabuf is listed (the binary was built against a
	// CUDA with DMA-BUF export).
	DMABuf bool
}

// ParseCUDAHelp reads the CUDA options from perftest's --help output.
// Only the option names count: the descriptions changed between versions
// ("Use CUDA lib for GPU-Direct testing." before 2020).
func ParseCUDAHelp(help []byte) CUDA {
	var c CUDA
	for _, line := range bytes.Split(help, []byte("\n")) {
		f := bytes.Fields(line)
		if len(f) == 0 {
			continue
		}
		opt, _, _ := bytes.Cut(f[0], []byte("="))
		switch string(opt) {
		case "--use_cuda":
			c.Supported = true
		case "--use_cuda_bus_id":
			c.BusID = true
		case "--use_cuda_dmabuf":
			c.DMABuf = true
		}
	}
	return c
}

// GPU names the GPU whose memory a run uses (--use_cuda). The zero value
// means host memory. Both sides of a loopback use the same GPU.
type GPU struct {
	// Set: the run uses GPU memory.
	Set bool
	// Index is the GPU's place in PCI bus order; the runner passes
	// CUDA_DEVICE_ORDER=PCI_BUS_ID so that CUDA numbers it the same way.
	Index int
	// BusID is the GPU's PCI address ("0000:19:00.0"); when set, and the
	// binary knows --use_cuda_bus_id, it names the GPU instead of Index
	// (CUDA_VISIBLE_DEVICES in a container cannot renumber it).
	BusID string
	// ByBusID selects --use_cuda_bus_id over --use_cuda.
	ByBusID bool
}

// MaxGPUIndex bounds a GPU index on a command line.
const MaxGPUIndex = 255

func (g GPU) validate(t Test) error {
	if !g.Set {
		return nil
	}
	if !CUDATest(t) {
		return fmt.Errorf("%s cannot use GPU memory: perftest runs CUDA latency tests with read and send only (its write latency test polls the buffer from the CPU)", t)
	}
	if g.Index < 0 || g.Index > MaxGPUIndex {
		return fmt.Errorf("gpu %d: want 0..%d", g.Index, MaxGPUIndex)
	}
	if g.ByBusID && !pci.IsAddress(g.BusID) {
		return fmt.Errorf("gpu bus id %q: not a PCI address", g.BusID)
	}
	return nil
}

func (g GPU) args() []string {
	switch {
	case !g.Set:
		return nil
	case g.ByBusID:
		return []string{"--use_cuda_bus_id=" + g.BusID}
	}
	return []string{"--use_cuda=" + strconv.Itoa(g.Index)}
}

// CUDATest reports whether perftest can run t with GPU memory: every
// bandwidth test, and the send and read latency tests ("Perftest supports
// CUDA latency tests with read/send verbs only", perftest issue #276).
func CUDATest(t Test) bool { return t.Bandwidth() || t == SendLat || t == ReadLat }

// cudaEnv makes CUDA number devices in PCI bus order, as rdma_doctor's GPU
// index does; CUDA's default puts the fastest first.
var cudaEnv = []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID"}

// cudaCache remembers a binary's CUDA support by path, size and
// modification time: --help costs a process start, and a binary replaced
// by a package upgrade is asked again.
type cudaCache struct {
	mu sync.Mutex
	m  map[string]cudaEntry
}

type cudaEntry struct {
	size int64
	mod  time.Time
	c    CUDA
}

// CUDA runs "<test> --help" (perftest exits 1 after it) and reports the
// GPU-memory options the binary lists. The answer is cached until the
// binary changes.
func (r *Runner) CUDA(ctx context.Context, t Test) (CUDA, error) {
	path, err := r.Path(t)
	if err != nil {
		return CUDA{}, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return CUDA{}, &Error{Kind: NotInstalled, Detail: err.Error(), Status: -1}
	}
	r.cuda.mu.Lock()
	if e, ok := r.cuda.m[path]; ok && e.size == fi.Size() && e.mod.Equal(fi.ModTime()) {
		r.cuda.mu.Unlock()
		return e.c, nil
	}
	r.cuda.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	o := &Outcome{Side: "help"}
	if err := r.start(ctx, o, path, []string{"--help"}, nil); err != nil {
		return CUDA{}, err
	}
	<-o.waitDone
	if o.Exit.Signal != "" || o.Exit.Killed {
		return CUDA{}, &Error{Kind: Failed, Side: "help", Detail: path + " --help did not finish", Status: -1}
	}
	c := ParseCUDAHelp(append(append([]byte{}, o.Stdout...), o.Stderr...))
	r.cuda.mu.Lock()
	if r.cuda.m == nil {
		r.cuda.m = map[string]cudaEntry{}
	}
	r.cuda.m[path] = cudaEntry{size: fi.Size(), mod: fi.ModTime(), c: c}
	r.cuda.mu.Unlock()
	return c, nil
}
