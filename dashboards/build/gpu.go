// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

//lint:file-ignore SA1019 The v1 dashboard model (dashboard.Dashboard) is deprecated in the SDK in favour of
// dashboardv2, which only Grafana 12 with its new-layouts feature imports; every Grafana imports v1 JSON.

package build

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/table"
)

// withGPUs adds the host dashboard's GPU row: the GPU↔HCA affinity matrix
// as nvidia-smi topo -m prints it (a GPU per row, an RDMA device per
// column, the relation in the cell), GPUDirect readiness per path, and
// the rail check's verdict. A host without GPUs has none of these series
// and the row stays empty.
func withGPUs(b *dashboard.DashboardBuilder, s selectors) *dashboard.DashboardBuilder {
	return b.WithRow(row("GPUs and GPUDirect RDMA")).
		WithPanel(affinityMatrix(`label_join(rdma_gpu_device_affinity{` + s.host + `}, "gpu_on", " GPU", "instance", "gpu")`)).
		WithPanel(timeline("GPUDirect ready", "Per path: peermem (nvidia_peermem holding ib_core), dmabuf (open NVIDIA module, kernel with P2PDMA). 0 on every path: RdmaGpuDirectNotReady.", okFail,
			query(`rdma_gpudirect_ready{`+s.host+`}`, "{{instance}} {{path}}"))).
		WithPanel(timeline("Rail check", "Diagnose checks gpu.rail and gpu.gpudirect: 0 pass, 1 warn, 2 fail (RdmaGpuRailMismatch, RdmaDiagnoseCheckFailing).", checkStates,
			query(`rdma_diagnose_status{`+s.host+`, check=~"gpu\\..+"}`, "{{instance}} {{check}} {{target}}")))
}

// affinityMatrix turns the affinity series into nvidia-smi's matrix: one
// row per host and GPU, one column per RDMA device, the link label in each
// cell.
func affinityMatrix(expr string) *table.PanelBuilder {
	return table.NewPanelBuilder().
		Title("GPU ↔ HCA affinity").
		Description("The PCI relation of every GPU to every RDMA device, as nvidia-smi topo -m names it: PIX one PCIe switch, PXB several, PHB the host bridge, NODE the same NUMA node, SYS across sockets. Every GPU wants a PIX (or PXB) HCA of its own.").
		Datasource(datasource).
		Height(10).Span(24).
		WithTarget(instant(expr).RefId("A")).
		WithTransformation(dashboard.DataTransformerConfig{Id: "groupingToMatrix", Options: map[string]any{
			"columnField": "device", "rowField": "gpu_on", "valueField": "link",
		}})
}
