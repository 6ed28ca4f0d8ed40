// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"sync"
	"testing"
	"time"
)

// TestStopTwice: the run's deferred stop and the signal handler's stopAll
// may stop one process at once; both must return.
func TestStopTwice(t *testing.T) {
	p, err := start("sleeper", "sleep", []string{"1000"}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { errs[i] = p.stop(10 * time.Second) })
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Errorf("stop: %v, %v", errs[0], errs[1])
	}
	if err := p.exited(); err == nil {
		t.Error("the process still runs after stop")
	}
	live.mu.Lock()
	defer live.mu.Unlock()
	if live.procs[p] {
		t.Error("a stopped process is still live")
	}
}

func TestStartFailsClearly(t *testing.T) {
	if _, err := start("nothing", "/nonexistent/exporter", nil, t.TempDir()); err == nil {
		t.Error("a missing binary started")
	}
}
