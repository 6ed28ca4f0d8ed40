// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package pci

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pcicfg"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

// The hgx-h100 CX-7s' config files hold the recorded DevCap MaxPayload
// 512 and DevCtl MaxPayload 256, MaxReadReq 4096 (gpud's lspci -vvv).
func TestReadDevicesPayload(t *testing.T) {
	devs, err := ReadDevices(context.Background(), fixtureHost(t, "hgx-h100").Sys, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 8 {
		t.Fatalf("%d devices", len(devs))
	}
	for _, d := range devs {
		p := d.PCI.Payload
		if !p.Read || p.NeedsRoot || p.MaxPayloadSupported != some(512) || p.MaxPayload != some(256) || p.MaxReadRequest != some(4096) {
			t.Errorf("%s: %+v", d.Name, p)
		}
		if got := p.String(); got != "MaxPayload 256 bytes, MaxReadReq 4096 bytes" {
			t.Errorf("%s: %q", d.Name, got)
		}
		if len(d.PCI.Errors) != 0 {
			t.Errorf("%s: errors %v", d.Name, d.PCI.Errors)
		}
	}
	// A host whose tree has no config files: nothing read, no error.
	devs, err = ReadDevices(context.Background(), fixtureHost(t, "numa-remote").Sys, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if d.PCI.Payload.Read || d.PCI.Payload.MaxPayload.OK || len(d.PCI.ErrorsFor(ConfigFile)) != 0 {
			t.Errorf("%s: %+v %v", d.Name, d.PCI.Payload, d.PCI.Errors)
		}
	}
}

func TestReadPayloadBadInput(t *testing.T) {
	const dir = "class/infiniband/mlx5_0/device"
	const name = dir + "/" + ConfigFile
	full, err := os.ReadFile(filepath.Join(hostfstest.FixtureDir(t, "hgx-h100"), "sys", name))
	if err != nil {
		t.Fatal(err)
	}
	// The capability list of the recorded CX-7 is Express at 0x60 alone;
	// point its next at itself to make it loop.
	loop := append([]byte(nil), full...)
	loop[0x61] = 0x60
	for _, tc := range []struct {
		what     string
		contents []byte
		err      error
		want     Payload
		wantErr  bool
	}{
		// What sysfs gives a reader without CAP_SYS_ADMIN.
		{what: "unprivileged", contents: full[:pcicfg.HeaderSize], want: Payload{Read: true, NeedsRoot: true}},
		{what: "truncated", contents: full[:63], wantErr: true},
		{what: "empty", contents: []byte{}, wantErr: true},
		{what: "loop", contents: loop, wantErr: true,
			want: Payload{Read: true, MaxPayloadSupported: some(512), MaxPayload: some(256), MaxReadRequest: some(4096)}},
		{what: "unreadable", err: syscall.EIO, wantErr: true},
		{what: "missing", err: syscall.ENOENT},
	} {
		sys := &hostfstest.Faulty{Base: fixtureHost(t, "hgx-h100").Sys}
		if tc.err != nil {
			sys.Errors = map[string]error{name: tc.err}
		} else {
			sys.Contents = map[string][]byte{name: tc.contents}
		}
		got, err := ReadPayload(sys, dir)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v (error %v)", tc.what, got, err, tc.want, tc.wantErr)
		}
		if err != nil && sysattr.ErrorPath(err) != name {
			t.Errorf("%s: error %v does not name %s", tc.what, err, name)
		}
		if tc.err != nil && err != nil && !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.what, err, tc.err)
		}
	}
}
