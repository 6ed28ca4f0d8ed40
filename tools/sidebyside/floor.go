// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
)

// floorList is the files an infiniband-only scrape reads, per device. It is
// made by walking the class tree the way the infiniband collector does
// (internal/read/infiniband.Read): for each class/infiniband/<dev>, the regular
// files in the device directory (node_type, node_guid, fw_ver, ...) and in
// its hw_counters/, the dev_port of each netdev of its PCI function
// (device/net/*/dev_port, to map ports to netdevs), and for each ports/<n>
// the regular files in the port directory (state, phys_state, rate, lid,
// ...), gid_attrs/ndevs/0 where it exists, and every file in counters/ and
// hw_counters/ (less lifespan, a setting). Directory listings and the opens
// of optional files that do not exist are not in it: the floor is the cost
// of the reads alone, so it is a little below what any scrape can reach.
//
// Checked once against strace -e openat of one infiniband-only scrape of
// dgx-h100 (go run ./tools/sidebyside -print-floor fixtures/hosts/dgx-h100
// prints the list): the same 577 files opened successfully; the scrape
// also opened 26 optional files that do not exist there
// (gid_attrs/ndevs/0, device/net/*/parent, device-level hw_counters/) and
// opened 46 directories to list them.
type floorList struct {
	devices [][]string // absolute paths, one slice per device
	ports   int
}

func (l floorList) files() int {
	n := 0
	for _, d := range l.devices {
		n += len(d)
	}
	return n
}

func listFloor(sysfs string) (floorList, error) {
	class := filepath.Join(sysfs, "class/infiniband")
	devs, err := os.ReadDir(class)
	if err != nil {
		return floorList{}, fmt.Errorf("floor list: %w", err)
	}
	var l floorList
	for _, d := range devs {
		dir := filepath.Join(class, d.Name())
		files := regular(dir)
		files = append(files, regular(filepath.Join(dir, "hw_counters"))...)
		nets, _ := os.ReadDir(filepath.Join(dir, "device/net"))
		for _, n := range nets {
			files = appendIfFile(files, filepath.Join(dir, "device/net", n.Name(), "dev_port"))
		}
		ports, err := os.ReadDir(filepath.Join(dir, "ports"))
		if err != nil {
			return floorList{}, fmt.Errorf("floor list: %s: %w", d.Name(), err)
		}
		for _, p := range ports {
			pd := filepath.Join(dir, "ports", p.Name())
			files = append(files, regular(pd)...)
			files = appendIfFile(files, filepath.Join(pd, "gid_attrs/ndevs/0"))
			files = append(files, regular(filepath.Join(pd, "counters"))...)
			for _, f := range regular(filepath.Join(pd, "hw_counters")) {
				// lifespan is the refresh setting, not a counter: the
				// collector does not read it.
				if filepath.Base(f) != "lifespan" {
					files = append(files, f)
				}
			}
			l.ports++
		}
		l.devices = append(l.devices, files)
	}
	// A class without devices (generated-0) has nothing to read; devices
	// without files are a tree the list does not understand.
	if len(l.devices) > 0 && l.files() == 0 {
		return l, fmt.Errorf("floor list: no files below %s", class)
	}
	return l, nil
}

// regular is the regular files directly in dir (none if dir is missing:
// a driver without hw_counters/ has nothing to read there).
func regular(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

func appendIfFile(files []string, p string) []string {
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
		return append(files, p)
	}
	return files
}

// read reads every file of the list with bare open/read/close, one
// goroutine per device as the collector reads devices in parallel, and
// returns the wall time and the bytes read.
func (l floorList) read() (time.Duration, int, error) {
	return perDevice(len(l.devices), func(i int) (int, error) {
		n := 0
		for _, f := range l.devices[i] {
			m, err := hostfstest.BareRead(f)
			if err != nil {
				return n, fmt.Errorf("floor: %s: %w", f, err)
			}
			n += m
		}
		return n, nil
	})
}

// keptFloor is the floor's files held open, one slice of descriptors per
// device, for the pread floor: one pread at offset 0 of each file, the
// least any reader of these files can do per scrape (rdma_doctor keeps
// its live attributes open and re-reads them so).
type keptFloor struct {
	devices [][]int
}

// open opens every file of the list. On error the files opened so far
// are closed.
func (l floorList) open() (keptFloor, error) {
	var k keptFloor
	for _, files := range l.devices {
		fds := make([]int, 0, len(files))
		for _, f := range files {
			fd, err := syscall.Open(f, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
			if err != nil {
				k.devices = append(k.devices, fds)
				k.close()
				return keptFloor{}, fmt.Errorf("pread floor: %s: %w", f, err)
			}
			fds = append(fds, fd)
		}
		k.devices = append(k.devices, fds)
	}
	return k, nil
}

func (k keptFloor) close() {
	for _, fds := range k.devices {
		for _, fd := range fds {
			_ = syscall.Close(fd)
		}
	}
}

// read preads every file once at offset 0 into a page-sized stack
// buffer, one goroutine per device as the floor's read does, and returns
// the wall time and the bytes read.
func (k keptFloor) read() (time.Duration, int, error) {
	return perDevice(len(k.devices), func(i int) (int, error) {
		var buf [4096]byte
		n := 0
		for _, fd := range k.devices[i] {
			m, err := syscall.Pread(fd, buf[:], 0)
			if err != nil {
				return n, fmt.Errorf("pread floor: device %d: %w", i, err)
			}
			n += m
		}
		return n, nil
	})
}

// perDevice runs read(i) for each of n devices at once and returns the
// wall time of them all and the bytes they read.
func perDevice(n int, read func(i int) (int, error)) (time.Duration, int, error) {
	start := time.Now()
	bytes := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { bytes[i], errs[i] = read(i) })
	}
	wg.Wait()
	el := time.Since(start)
	total := 0
	for i := range bytes {
		if errs[i] != nil {
			return el, 0, errs[i]
		}
		total += bytes[i]
	}
	return el, total, nil
}

// selfCPU is this process's user+system CPU time.
func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
