// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package podres

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/rdma-doctor/rdma_doctor/internal/read/pci"
)

// recorded is testdata/list.json (README.md) in the grpcurl JSON form.
type recorded struct {
	PodResources []struct {
		Name, Namespace string
		Containers      []struct {
			Name    string
			Devices []struct {
				ResourceName string
				DeviceIds    []string
				Topology     *struct {
					Nodes []struct{ ID string }
				}
			}
			CPUIds []string `json:"cpuIds"`
		}
	}
}

// encode writes the answer as the kubelet sends it: protobuf with the
// field numbers of api.proto, topology and cpu_ids included so that the
// decoder's skipping is exercised.
func encode(t *testing.T, r recorded) []byte {
	t.Helper()
	msg := func(b []byte, num protowire.Number, v []byte) []byte {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendBytes(b, v)
	}
	var out []byte
	for _, p := range r.PodResources {
		var pb []byte
		pb = msg(pb, 1, []byte(p.Name))
		pb = msg(pb, 2, []byte(p.Namespace))
		for _, c := range p.Containers {
			var cb []byte
			cb = msg(cb, 1, []byte(c.Name))
			for _, d := range c.Devices {
				var db []byte
				db = msg(db, 1, []byte(d.ResourceName))
				for _, id := range d.DeviceIds {
					db = msg(db, 2, []byte(id))
				}
				if d.Topology != nil {
					var tb []byte
					for range d.Topology.Nodes {
						tb = msg(tb, 1, protowire.AppendTag(nil, 1, protowire.VarintType))
					}
					db = msg(db, 3, tb)
				}
				cb = msg(cb, 2, db)
			}
			var ids []byte // packed repeated int64 cpu_ids = 3
			for range c.CPUIds {
				ids = protowire.AppendVarint(ids, 4)
			}
			if ids != nil {
				cb = msg(cb, 3, ids)
			}
			pb = msg(pb, 3, cb)
		}
		out = msg(out, 1, pb)
	}
	return out
}

func loadRecorded(t *testing.T) recorded {
	t.Helper()
	b, err := os.ReadFile("testdata/list.json")
	if err != nil {
		t.Fatal(err)
	}
	var r recorded
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// kubelet serves h on a unix socket as the kubelet's gRPC server does
// (HTTP/2 with prior knowledge, no TLS) and returns the socket's path.
func kubelet(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubelet.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: &p}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return path
}

// grpcAnswer answers List with body as a gRPC server does: the message
// length-prefixed, the status in the trailers.
func grpcAnswer(t *testing.T, body []byte, code string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != listMethod || r.ProtoMajor != 2 || r.Header.Get("Content-Type") != "application/grpc" {
			t.Errorf("request %s %s %s %q, want HTTP/2 POST %s application/grpc", r.Method, r.Proto, r.URL.Path, r.Header.Get("Content-Type"), listMethod)
		}
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
		if body != nil {
			var pre [5]byte
			binary.BigEndian.PutUint32(pre[1:], uint32(len(body)))
			_, _ = w.Write(pre[:])
			_, _ = w.Write(body)
		}
		w.Header().Set("Grpc-Status", code)
		if code != "0" {
			w.Header().Set("Grpc-Message", "permission denied")
		}
	}
}

func TestListRecorded(t *testing.T) {
	r := loadRecorded(t)
	sock := kubelet(t, grpcAnswer(t, encode(t, r), "0"))
	pods, err := List(context.Background(), sock, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != len(r.PodResources) {
		t.Fatalf("%d pods, want %d", len(pods), len(r.PodResources))
	}
	for i, p := range r.PodResources {
		var want []Device
		for _, c := range p.Containers {
			for _, d := range c.Devices {
				want = append(want, Device{Resource: d.ResourceName, IDs: d.DeviceIds})
			}
		}
		got := pods[i]
		if got.Name != p.Name || got.Namespace != p.Namespace || !reflect.DeepEqual(got.Devices, want) {
			t.Errorf("pod %d = %+v, want %s/%s %+v", i, got, p.Namespace, p.Name, want)
		}
	}

	// The host: the VFs of two pods are RDMA devices (mlx5_2..4), the
	// PF's RDMA device is mlx5_0; mlx5_3 (0000:d2:00.3) is dropped by the
	// device filter, so it is not in devs.
	devs := []pci.Device{
		{Name: "mlx5_0", PCI: pci.Function{Address: "0000:05:00.0"}},
		{Name: "mlx5_2", PCI: pci.Function{Address: "0000:05:00.1"}},
		{Name: "mlx5_4", PCI: pci.Function{Address: "0000:d2:00.4"}},
		{Name: "rxe0"}, // software device: no PCI function
	}
	s := Match(pods, devs, 256)
	want := &Snapshot{Listed: 4, Pods: []Holding{
		{Namespace: "default", Pod: "nccl-test-worker-0", Devices: []string{"mlx5_2"}},
		{Namespace: "hpc-jobs", Pod: "mpi-launcher-7c9d", Devices: []string{"mlx5_4"}},
	}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("Match = %+v, want %+v", s, want)
	}
	// The bound: the pods past it are counted, never named.
	if s := Match(pods, devs, 1); len(s.Pods) != 1 || s.Unread != 1 || s.Pods[0].Pod != "nccl-test-worker-0" {
		t.Errorf("Match(max 1) = %+v, want the first pod and 1 unread", s)
	}
}

// Every failure is an error, never an empty list of pods.
func TestListFails(t *testing.T) {
	body := encode(t, loadRecorded(t))
	for name, sock := range map[string]string{
		"no socket":   filepath.Join(t.TempDir(), "kubelet.sock"),
		"denied":      kubelet(t, grpcAnswer(t, nil, "7")),
		"no status":   kubelet(t, func(w http.ResponseWriter, _ *http.Request) { w.Header().Set("Content-Type", "application/grpc") }),
		"cut message": kubelet(t, grpcAnswer(t, body[:len(body)/2], "0")),
		"not gRPC":    kubelet(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hello")) }),
		"truncated": kubelet(t, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Trailer", "Grpc-Status")
			var pre [5]byte
			binary.BigEndian.PutUint32(pre[1:], uint32(len(body)+10))
			_, _ = w.Write(append(pre[:], body...))
			w.Header().Set("Grpc-Status", "0")
		}),
		"hangs": kubelet(t, func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }),
	} {
		t.Run(name, func(t *testing.T) {
			pods, err := List(context.Background(), sock, 200*time.Millisecond)
			if err == nil || pods != nil {
				t.Fatalf("List = %v, %v; want an error", pods, err)
			}
			if !strings.Contains(err.Error(), sock) {
				t.Errorf("error %q does not name the socket", err)
			}
		})
	}
}

func TestValidName(t *testing.T) {
	for s, want := range map[string]bool{
		"default": true, "kube-system": true, "coredns-6f6b679f8f-v2fqq": true, "a.b": true,
		"": false, "-a": false, "a-": false, "A": false, "a_b": false, `a"b`: false, strings.Repeat("a", 254): false,
	} {
		if ValidName(s) != want {
			t.Errorf("ValidName(%q) = %v", s, !want)
		}
	}
}
