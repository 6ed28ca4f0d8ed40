// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"debug/elf"
	"fmt"
	"strconv"
	"time"

	"github.com/rdma-doctor/rdma_doctor/tools/internal/sbsresult"
)

// bareExporter runs tools/bareexporter, client_golang's default registry
// and nothing else.
func bareExporter(bin string) exporterSpec {
	return exporterSpec{name: "bareexporter", bin: bin, args: func(_ string, port int) []string {
		return []string{"-listen", "127.0.0.1:" + strconv.Itoa(port)}
	}}
}

// httpFloor runs tools/bareexporter serving the exposition in file body.
func httpFloor(bin, body, contentType string) exporterSpec {
	return exporterSpec{name: "http floor", bin: bin, args: func(_ string, port int) []string {
		return []string{"-listen", "127.0.0.1:" + strconv.Itoa(port), "-body", body, "-content-type", contentType}
	}}
}

// measureMemory runs rdma_doctor (its default collectors), node_exporter,
// the bare client_golang exporter and yuuki/rdma_exporter (when given) at
// once on root, scrapes each n
// times interleaved, and reads where their resident memory lies: anonymous
// (heap, stacks) or file-backed (the binary's pages), and the files each
// holds open (kernel memory outside it). The file-backed part
// follows from the binary's size and the kernel's page cache (how much of
// a file one page fault maps), not from what the exporter does; the bare
// exporter shows the least a client_golang exporter has of each here.
func measureMemory(b binaries, work, host, root string, n int) ([]sbsresult.Memory, error) {
	specs := []exporterSpec{rdmaDoctor(b.rdmaDoctor, false), nodeExporter(b.nodeExporter), bareExporter(b.bareExporter)}
	if b.yuuki != "" {
		specs = append(specs, yuukiExporter(b.yuuki))
	}
	var cs []*contender
	var pids []int
	var out []sbsresult.Memory
	for _, s := range specs {
		r, err := s.start(root, work)
		if err != nil {
			return nil, err
		}
		defer func() { _ = r.proc.stop(10 * time.Second) }()
		load, err := loadBytes(s.bin)
		if err != nil {
			return nil, err
		}
		t := r.target
		cs = append(cs, &contender{name: t.name, step: t.scrape})
		pids = append(pids, t.pid)
		out = append(out, sbsresult.Memory{Name: s.name, Host: host, LoadBytes: load, Scrapes: n})
	}
	fmt.Printf("sidebyside: memory: %d scrapes of each on %s\n", n, host)
	if err := loop(cs, n); err != nil {
		return nil, err
	}
	for i, pid := range pids {
		m := &out[i]
		var err error
		if m.RSS, m.Anon, m.File, err = procMemory(pid); err != nil {
			return nil, err
		}
		if m.OpenFiles, err = procOpenFiles(pid); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// loadBytes is the size of the loadable segments of ELF file bin.
func loadBytes(bin string) (uint64, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n uint64
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			n += p.Filesz
		}
	}
	return n, nil
}
