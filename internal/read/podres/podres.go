// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package podres asks the kubelet which pods hold which RDMA devices: its
// pod-resources API (v1.PodResourcesLister/List, gRPC over the unix socket
// /var/lib/kubelet/pod-resources/kubelet.sock) names each container's
// device-plugin devices, and an RDMA device plugin's device ids are PCI
// addresses (sriov-network-device-plugin, one VF per id) or RDMA device
// names.
//
// The client is hand-written, not k8s.io/kubelet's generated one: List is
// one unary call with an empty request, and grpc-go plus the generated
// code would add megabytes to the binary for it. gRPC over HTTP/2 is
// net/http's unencrypted HTTP/2 with prior knowledge (h2c), the message a
// 5-byte length prefix and protobuf read with protowire.
package podres

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// SocketPath is the kubelet's pod-resources socket below the root file
// system (--path.rootfs).
const SocketPath = "var/lib/kubelet/pod-resources/kubelet.sock"

// listMethod is the gRPC path of List (pkg/apis/podresources/v1/api.proto:
// package v1, service PodResourcesLister).
const listMethod = "/v1.PodResourcesLister/List"

// Bounds of one call. The kubelet's gRPC server sends at most 16 MiB
// (grpc-go's default is 4 MiB received; the kubelet raises it for this
// API): a node with hundreds of pods answers some hundred KiB.
const (
	DefaultTimeout = 5 * time.Second
	MaxResponse    = 16 << 20
)

// Pod is one pod of a List answer with the device-plugin devices its
// containers hold.
type Pod struct {
	Namespace, Name string
	Devices         []Device
}

// Device is one resource's devices held by a container of the pod.
type Device struct {
	Resource string
	IDs      []string
}

// List calls v1.PodResourcesLister/List on the kubelet socket at path,
// bounded by timeout (0 is DefaultTimeout) and MaxResponse. Any failure is
// an error naming the socket: the caller must not read it as "no pods".
func List(ctx context.Context, path string, timeout time.Duration) ([]Pod, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, err := call(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("kubelet pod-resources %s: %w", path, err)
	}
	pods, err := Decode(body)
	if err != nil {
		return nil, fmt.Errorf("kubelet pod-resources %s: List answer: %w", path, err)
	}
	return pods, nil
}

// call makes the unary gRPC call and returns the answer's message.
func call(ctx context.Context, path string) ([]byte, error) {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true) // prior knowledge h2c: what a gRPC server speaks
	tr := &http.Transport{
		Protocols: &p,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}
	defer tr.CloseIdleConnections()
	// An empty ListPodResourcesRequest: no compression, length 0.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://localhost"+listMethod, bytes.NewReader(make([]byte, 5)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/grpc") {
		return nil, fmt.Errorf("content type %q, not gRPC", ct)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse+5+1))
	if err != nil {
		return nil, err
	}
	// The status is in the trailers, or in the headers of a
	// trailers-only answer (an error without a message).
	if err := status(resp.Trailer, resp.Header); err != nil {
		return nil, err
	}
	return message(raw)
}

// status is the call's gRPC status as an error; nil for OK.
func status(trailer, header http.Header) error {
	code, msg := trailer.Get("Grpc-Status"), trailer.Get("Grpc-Message")
	if code == "" {
		code, msg = header.Get("Grpc-Status"), header.Get("Grpc-Message")
	}
	switch code {
	case "0":
		return nil
	case "":
		return errors.New("no gRPC status (answer cut short)")
	}
	return fmt.Errorf("gRPC status %s: %q", code, msg)
}

// message is the one length-prefixed message of a unary answer.
func message(raw []byte) ([]byte, error) {
	if len(raw) < 5 {
		return nil, fmt.Errorf("answer of %d bytes, no message", len(raw))
	}
	if raw[0] != 0 {
		return nil, errors.New("compressed message (none was offered)")
	}
	n := binary.BigEndian.Uint32(raw[1:5])
	if n > MaxResponse {
		return nil, fmt.Errorf("message of %d bytes, over the %d bound", n, MaxResponse)
	}
	if int(n) != len(raw)-5 {
		return nil, fmt.Errorf("message of %d bytes announced, %d sent", n, len(raw)-5)
	}
	return raw[5:], nil
}

// Field numbers of pkg/apis/podresources/v1/api.proto.
const (
	fieldPodResources = 1 // ListPodResourcesResponse.pod_resources

	fieldPodName       = 1 // PodResources.name
	fieldPodNamespace  = 2 // PodResources.namespace
	fieldPodContainers = 3 // PodResources.containers

	fieldContainerDevices = 2 // ContainerResources.devices

	fieldDeviceResource = 1 // ContainerDevices.resource_name
	fieldDeviceIDs      = 2 // ContainerDevices.device_ids
)

// Decode reads a ListPodResourcesResponse: its pods, each with the
// devices of all its containers. Unknown fields (cpu_ids, memory,
// topology, dynamic_resources) are skipped.
func Decode(b []byte) ([]Pod, error) {
	var pods []Pod
	err := fields(b, func(num protowire.Number, v []byte) error {
		if num != fieldPodResources {
			return nil
		}
		p, err := decodePod(v)
		if err != nil {
			return fmt.Errorf("pod %d: %w", len(pods), err)
		}
		pods = append(pods, p)
		return nil
	})
	return pods, err
}

func decodePod(b []byte) (Pod, error) {
	var p Pod
	err := fields(b, func(num protowire.Number, v []byte) error {
		switch num {
		case fieldPodName:
			p.Name = string(v)
		case fieldPodNamespace:
			p.Namespace = string(v)
		case fieldPodContainers:
			return fields(v, func(num protowire.Number, v []byte) error {
				if num != fieldContainerDevices {
					return nil
				}
				var d Device
				err := fields(v, func(num protowire.Number, v []byte) error {
					switch num {
					case fieldDeviceResource:
						d.Resource = string(v)
					case fieldDeviceIDs:
						d.IDs = append(d.IDs, string(v))
					}
					return nil
				})
				p.Devices = append(p.Devices, d)
				return err
			})
		}
		return nil
	})
	return p, err
}

// fields calls f with each length-delimited field of the message b (the
// only wire type of the fields read); others are skipped.
func fields(b []byte, f func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, v); err != nil {
			return err
		}
	}
	return nil
}
