// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package deploy holds no code: it is the home of the deployment files
// (systemd/, kubernetes/, the example config) and of the tests that validate
// them. The Kubernetes manifests are checked against the upstream schemas in
// schemas/ (see schemas/generate.go); the systemd unit with systemd-analyze.
package deploy
