// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package podres

import (
	"sort"

	"github.com/rdma-doctor/rdma_doctor/internal/read/pci"
)

// Holding is a pod and the RDMA devices it holds, sorted.
type Holding struct {
	Namespace, Pod string
	Devices        []string
}

// Snapshot is the pods of a host that hold RDMA devices.
type Snapshot struct {
	// Pods are the pods holding at least one RDMA device, sorted by
	// namespace and name, at most the max given to Match.
	Pods []Holding
	// Listed is how many pods the kubelet lists, RDMA or not.
	Listed int
	// Unread counts the pods holding RDMA devices past the max, or with a
	// namespace or name that is not a Kubernetes name: no series names
	// them, so their devices are unknown.
	Unread int
}

// Match maps each pod's device ids to the RDMA devices devs (those the
// device filter keeps): an id is a device's PCI function address
// (sriov-network-device-plugin, a VF per id) or its name. Ids of other
// resources (GPUs, shared-device plugins whose ids name no device) are
// ignored. At most max pods are kept (max <= 0 keeps none).
func Match(pods []Pod, devs []pci.Device, max int) *Snapshot {
	byID := make(map[string]string, 2*len(devs))
	for _, d := range devs {
		byID[d.Name] = d.Name
		if d.PCI.Address != "" {
			byID[d.PCI.Address] = d.Name
		}
	}
	s := &Snapshot{Listed: len(pods)}
	for _, p := range pods {
		held := map[string]bool{}
		for _, d := range p.Devices {
			for _, id := range d.IDs {
				if name, ok := byID[id]; ok {
					held[name] = true
				}
			}
		}
		if len(held) == 0 {
			continue
		}
		if !ValidName(p.Namespace) || !ValidName(p.Name) {
			s.Unread++
			continue
		}
		h := Holding{Namespace: p.Namespace, Pod: p.Name}
		for n := range held {
			h.Devices = append(h.Devices, n)
		}
		sort.Strings(h.Devices)
		s.Pods = append(s.Pods, h)
	}
	sort.Slice(s.Pods, func(i, j int) bool {
		a, b := s.Pods[i], s.Pods[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Pod < b.Pod
	})
	if max < 0 {
		max = 0
	}
	if len(s.Pods) > max {
		s.Unread += len(s.Pods) - max
		s.Pods = s.Pods[:max]
	}
	return s
}

// ValidName reports whether s is a Kubernetes namespace or pod name (an
// RFC 1123 subdomain: at most 253 of [a-z0-9.-], alphanumeric at both
// ends), so that a label made of it stays bounded and printable.
func ValidName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (c != '-' && c != '.' || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}
