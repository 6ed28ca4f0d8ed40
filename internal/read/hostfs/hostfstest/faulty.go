// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package hostfstest injects faults into a hostfs.FS: errors on chosen
// paths, replaced contents, and a record of what was read.
package hostfstest

import (
	"io/fs"
	"sync"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// Faulty wraps an FS. Paths are the slash-separated names the FS is called
// with ("class/infiniband/mlx5_0/ports/1/rate").
type Faulty struct {
	Base hostfs.FS
	// Errors makes any call on a path fail with the error.
	Errors map[string]error
	// Contents replaces what ReadFile returns for a path.
	Contents map[string][]byte

	mu    sync.Mutex
	reads map[string]int
}

func (f *Faulty) record(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reads == nil {
		f.reads = map[string]int{}
	}
	f.reads[name]++
	if err, ok := f.Errors[name]; ok {
		return &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return nil
}

// Reads reports how many calls touched name.
func (f *Faulty) Reads(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads[name]
}

// ReadFile implements hostfs.FS.
func (f *Faulty) ReadFile(name string) ([]byte, error) {
	if err := f.record(name); err != nil {
		return nil, err
	}
	if b, ok := f.Contents[name]; ok {
		return append([]byte(nil), b...), nil
	}
	return f.Base.ReadFile(name)
}

// ReadDir implements hostfs.FS.
func (f *Faulty) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := f.record(name); err != nil {
		return nil, err
	}
	return f.Base.ReadDir(name)
}

// ReadLink implements hostfs.FS.
func (f *Faulty) ReadLink(name string) (string, error) {
	if err := f.record(name); err != nil {
		return "", err
	}
	return f.Base.ReadLink(name)
}
