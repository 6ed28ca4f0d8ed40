// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"path/filepath"
	"strings"
	"testing"
)

// The rail and GPUDirect checks on the GPU fixture hosts: the recorded
// H100 tree passes on every rail with nvidia_peermem registered; without
// the rail-2 HCA and with peermem unregistered under the proprietary
// module, GPU2 and the host fail with a remedy naming the fix; a host
// without GPUs skips both.
func TestGPUChecks(t *testing.T) {
	good := evaluateHost(t, filepath.Join(fixtures, "hgx-h100"), nil)
	bad := evaluateHost(t, filepath.Join(fixtures, "hgx-h100-nogdr"), nil)
	none := evaluateHost(t, filepath.Join(fixtures, "dgx-h100"), nil)
	for _, w := range []struct {
		r             *Report
		check, target string
		sev           Severity
		contains      []string
	}{
		{good, "gpu.rail", "gpu0", Pass, []string{"mlx5_0 at PIX", "0000:17:01.0"}},
		{good, "gpu.rail", "gpu7", Pass, []string{"mlx5_9 at PIX"}},
		{good, "gpu.gpudirect", "host", Pass, []string{"peermem (nvidia_peermem)", "/sys/module/ib_core/holders/nvidia_peermem"}},
		{bad, "gpu.rail", "gpu2", Fail, []string{"mlx5_0,mlx5_1,mlx5_5 at NODE", "NCCL_IB_HCA", "NCCL_TOPO_FILE", "0000:49:00.0"}},
		{bad, "gpu.rail", "gpu3", Pass, []string{"mlx5_5 at PIX"}},
		{bad, "gpu.gpudirect", "host", Fail, []string{"not registered with ib_core", "proprietary module 515.76", "CONFIG_PCI_P2PDMA=y"}},
		{none, "gpu.rail", "host", Skip, []string{"no GPUs"}},
		{none, "gpu.gpudirect", "host", Skip, []string{"no GPUs"}},
	} {
		f, ok := finding(w.r, w.check, w.target)
		if !ok {
			t.Errorf("%s %s: no finding", w.check, w.target)
			continue
		}
		if f.Severity != w.sev {
			t.Errorf("%s %s: %s, want %s (%s / %s)", w.check, w.target, f.Severity, w.sev, f.Observed, f.Evidence)
		}
		all := f.Observed + " " + f.Evidence + " " + f.Remedy
		for _, c := range w.contains {
			if !strings.Contains(all, c) {
				t.Errorf("%s %s: %q not in %q", w.check, w.target, c, all)
			}
		}
	}
}
