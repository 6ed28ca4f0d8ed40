// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package report renders a diagnose.Report (text, JSON, HTML, NHC and the
// printable copy they share), serves it over HTTP (/diagnose) and runs the
// `rdma_doctor diagnose` command's output and exit code. It depends on the
// engine's types only: the catalogue comes in through Command.Checks.
package report
