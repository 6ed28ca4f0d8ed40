// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package podrestest is a fake kubelet pod-resources server for tests: a
// unix socket answering v1.PodResourcesLister/List as the kubelet's gRPC
// server does (HTTP/2 with prior knowledge, a length-prefixed protobuf
// message, the status in the trailers).
package podrestest

import (
	"encoding/binary"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/rdma-doctor/rdma_doctor/internal/read/podres"
)

// Encode is the ListPodResourcesResponse of pods, one container each
// (field numbers of pkg/apis/podresources/v1/api.proto).
func Encode(pods []podres.Pod) []byte {
	msg := func(b []byte, num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
	}
	var out []byte
	for _, p := range pods {
		var cb []byte
		cb = msg(cb, 1, []byte("main"))
		for _, d := range p.Devices {
			db := msg(nil, 1, []byte(d.Resource))
			for _, id := range d.IDs {
				db = msg(db, 2, []byte(id))
			}
			cb = msg(cb, 2, db)
		}
		pb := msg(nil, 1, []byte(p.Name))
		pb = msg(pb, 2, []byte(p.Namespace))
		pb = msg(pb, 3, cb)
		out = msg(out, 1, pb)
	}
	return out
}

// Serve serves pods on a new unix socket until the test ends and returns
// its path. A code other than "0" answers that gRPC status and no pods.
func Serve(t testing.TB, pods []podres.Pod, code string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubelet.sock")
	ServeAt(t, path, pods, code)
	return path
}

// ServeAt is Serve on the socket path (a fixture host's
// podres.SocketPath); its directory must exist.
func ServeAt(t testing.TB, path string, pods []podres.Pod, code string) {
	t.Helper()
	body := Encode(pods)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &p, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status")
		if code == "0" {
			var pre [5]byte
			binary.BigEndian.PutUint32(pre[1:], uint32(len(body)))
			_, _ = w.Write(append(pre[:], body...))
		}
		w.Header().Set("Grpc-Status", code)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
}
