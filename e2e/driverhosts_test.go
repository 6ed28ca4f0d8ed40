// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// TestDriverHosts holds the hosts of fixtures/hosts.d/45-driver-hosts.sh
// (AWS EFA, Intel E810 irdma in RoCE mode, soft-iWARP) to issue 14's "Done
// when": every collector succeeds unless a file really cannot be read, no
// port FAILs, IRQ series are right or absent (never a made-up zero), no
// remedy is an InfiniBand one on a non-InfiniBand port; and the driver
// facts the recordings show come through.
func TestDriverHosts(t *testing.T) {
	type want struct {
		// infiniband collector errors the tree really has (a file left out
		// because no recording has its value), each naming its file
		ibErrors []string
		// gpu collector errors the tree really has (the same: a PCI
		// function whose IDs no recording gives)
		gpuErrors []string
		info      map[string]map[string]string // device -> rdma_device_info labels
		ports     map[string]map[string]string // device/port -> rdma_port_info labels
		values    [][]string                   // metric, value, label pairs...
		absent    []string                     // metrics no series of which may exist
		// series (metric, label pairs...) that must be absent: a value
		// whose file is missing, never a made-up zero
		absentSeries [][]string
	}
	cases := map[string]want{
		"efa-aws": {
			info: map[string]map[string]string{"efa_0": {"node_type": "unspecified", "fw_ver": "",
				"hca_type": "", "node_guid": "0x0000000000000000"}},
			ports: map[string]map[string]string{"efa_0/1": {"link_layer": "Unknown", "speed": "EDR", "width": "4X", "netdev": ""}},
			values: [][]string{
				{"rdma_port_rate_bytes_per_second", "1.25e+10", "device", "efa_0"},
				{"rdma_port_lmc", "1", "device", "efa_0"},
				{"rdma_device_numa_node", "-1", "device", "efa_0"},
			},
			// EFA has no PMA and no recorded hw_counters; no IRQ row names it
			absent: []string{"rdma_port_data_received_bytes_total", "rdma_port_hw_counter_total",
				"rdma_device_irqs", "rdma_device_irq_cpus", "rdma_device_irqs_off_node"},
		},
		"irdma-e810": {
			info: map[string]map[string]string{
				"irdma0": {"node_type": "CA", "fw_ver": "1.71", "hca_type": "", "hw_rev": ""},
				"irdma1": {"node_type": "CA", "fw_ver": "1.71", "hca_type": "", "hw_rev": ""},
			},
			ports: map[string]map[string]string{
				"irdma0/1": {"link_layer": "Ethernet", "speed": "EDR", "width": "1X", "netdev": "ens8np0"},
				"irdma1/1": {"link_layer": "Ethernet", "speed": "FDR10", "width": "1X", "netdev": "ens9np0"},
			},
			values: [][]string{
				{"rdma_port_rate_bytes_per_second", "3.125e+09", "device", "irdma0"},
				{"rdma_port_rate_bytes_per_second", "1.25e+09", "device", "irdma1"},
				// irdma's own counter names, at both levels, lifespan not a counter
				{"rdma_port_hw_counter_total", "5.884668e+06", "device", "irdma0", "counter", "ip4InOctets"},
				{"rdma_device_hw_counter_total", "5.884668e+06", "device", "irdma0", "counter", "ip4InOctets"},
				{"rdma_port_hw_counter_total", "14562", "device", "irdma0", "counter", "iwOutRdmaWrites"},
			},
			absent: []string{"rdma_port_data_received_bytes_total", "rdma_device_irqs", "rdma_device_irq_cpus"},
		},
		"siw-softiwarp": {
			// the recording has no rate: the file is left out, and that is
			// the one error (a real siw0 has the file)
			ibErrors: []string{"siw0/ports/1/rate"},
			// nor the PCI IDs of its virtio NIC: the gpu collector, which
			// reads every function's vendor, counts that one error
			gpuErrors: []string{"devices/0000:00:01.0/vendor"},
			info:      map[string]map[string]string{"siw0": {"node_type": "RNIC", "fw_ver": "", "sys_image_guid": "0x18c04dee0c320000"}},
			ports:     map[string]map[string]string{"siw0/1": {"link_layer": "Ethernet", "speed": "", "width": ""}},
			values: [][]string{
				{"rdma_port_state", "4", "device", "siw0"},
				{"rdma_port_capability_mask", "589824", "device", "siw0"},
			},
			absent: []string{"rdma_port_rate_bytes_per_second", "rdma_port_data_received_bytes_total",
				"rdma_port_hw_counter_total", "rdma_device_irqs", "rdma_device_numa_node"},
		},
		"bnxt_re-roce": {
			// the recording gives neither port's rate (the netdev speed)
			// nor bnxt_re1's state: those files are left out, and each is
			// one error (a real bnxt_re port has them)
			ibErrors: []string{"bnxt_re0/ports/1/rate", "bnxt_re1/ports/1/state",
				"bnxt_re1/ports/1/phys_state", "bnxt_re1/ports/1/rate"},
			info: map[string]map[string]string{
				// hca_type is the driver's node description, hw_rev the PCI
				// vendor; no board_id; no fw_ver recorded: an empty label
				"bnxt_re0": {"node_type": "CA", "fw_ver": "", "hca_type": "Broadcom NetXtreme-C/E RoCE Driver HCA",
					"hw_rev": "0x14e4", "board_id": "", "node_guid": "0x020af7fffee36e32", "sys_image_guid": "0x020af7fffee36e32"},
				"bnxt_re1": {"node_type": "CA", "node_guid": "0x020af7fffee36e33"},
			},
			ports: map[string]map[string]string{
				"bnxt_re0/1": {"link_layer": "Ethernet", "netdev": "bnxt_roce", "speed": "", "width": ""},
				"bnxt_re1/1": {"link_layer": "Ethernet", "netdev": "lom_2"},
			},
			values: [][]string{
				{"rdma_port_state", "4", "device", "bnxt_re0"},
				{"rdma_port_physical_state", "5", "device", "bnxt_re0"},
				// CM | REINIT | DEVICE_MGMT | VENDOR_CLASS (bnxt_re_query_port)
				{"rdma_port_capability_mask", "1.900544e+06", "device", "bnxt_re0"},
				// the GIDs of the VLAN netdevs come through under their names
				{"rdma_netdev_roce_gids", "2", "device", "bnxt_re0", "netdev", "bnxt_roce.43", "gid_type", "RoCE v2"},
				{"rdma_netdev_roce_gids", "1", "device", "bnxt_re1", "netdev", "lom_2", "gid_type", "RoCE v2"},
				{"rdma_netdev_up", "1", "netdev", "bnxt_roce"},
				{"rdma_device_numa_node", "-1", "device", "bnxt_re0"},
			},
			// upstream bnxt_re has no PMA (no process_mad) and no recorded
			// hw_counters values; no IRQ row names the functions
			absent: []string{"rdma_port_rate_bytes_per_second", "rdma_port_data_received_bytes_total",
				"rdma_port_hw_counter_total", "rdma_device_hw_counter_total",
				"rdma_device_irqs", "rdma_device_irq_cpus", "rdma_device_irqs_off_node"},
			absentSeries: [][]string{
				{"rdma_port_state", "device", "bnxt_re1"},
				{"rdma_port_physical_state", "device", "bnxt_re1"},
				{"rdma_netdev_up", "netdev", "lom_2"},
				{"rdma_netdev_carrier", "netdev", "lom_2"},
			},
		},
	}
	for host, w := range cases {
		t.Run(host, func(t *testing.T) {
			e := start(t, hostArgs(t, host)...)
			_, body := e.get(t, "/metrics")
			fams := scrapeFamilies(t, body)

			for _, s := range fams["rdma_scrape_collector_success"] {
				c := s.labels["collector"]
				wantOK := (c != "infiniband" || len(w.ibErrors) == 0) && (c != "gpu" || len(w.gpuErrors) == 0)
				if (s.value == 1) != wantOK {
					t.Errorf("collector %s success %v, want %v", c, s.value, wantOK)
				}
			}
			if s, _ := lookup(fams, "rdma_scrape_collector_errors", "collector", "infiniband"); int(s.value) != len(w.ibErrors) {
				t.Errorf("infiniband collector errors %v, want %d", s.value, len(w.ibErrors))
			}
			log := e.settledLog(len(w.ibErrors)+len(w.gpuErrors), func(l string) int { return strings.Count(l, `msg="collector error"`) })
			for _, f := range append(w.ibErrors, w.gpuErrors...) {
				if !strings.Contains(log, f+": no such file") {
					t.Errorf("no collector error naming %s\n%s", f, log)
				}
			}

			for dev, labels := range w.info {
				s, ok := lookup(fams, "rdma_device_info", "device", dev)
				if !ok {
					t.Errorf("no rdma_device_info for %s", dev)
				}
				for k, v := range labels {
					if s.labels[k] != v {
						t.Errorf("%s %s = %q, want %q", dev, k, s.labels[k], v)
					}
				}
			}
			for key, labels := range w.ports {
				dev, port, _ := strings.Cut(key, "/")
				s, ok := lookup(fams, "rdma_port_info", "device", dev, "port", port)
				if !ok {
					t.Errorf("no rdma_port_info for %s", key)
				}
				for k, v := range labels {
					if s.labels[k] != v {
						t.Errorf("%s %s = %q, want %q", key, k, s.labels[k], v)
					}
				}
			}
			for _, v := range w.values {
				s, ok := lookup(fams, v[0], v[2:]...)
				if got := fmtValue(s.value); !ok || got != v[1] {
					t.Errorf("%s%v = %s (present %v), want %s", v[0], v[2:], got, ok, v[1])
				}
			}
			for _, m := range w.absent {
				if len(fams[m]) > 0 {
					t.Errorf("%s exported %v, want absent (no such data on this driver)", m, fams[m])
				}
			}
			for _, a := range w.absentSeries {
				if s, ok := lookup(fams, a[0], a[1:]...); ok {
					t.Errorf("%s%v = %v, want absent (its file is missing)", a[0], a[1:], s.value)
				}
			}

			// diagnose: nothing fails, so `diagnose --format=nhc` never
			// drains the node, and no remedy speaks InfiniBand to a port that
			// is not one
			out, _, code := diagnoseCLI(t, diagArgs(t, host), "--format=json")
			var r struct {
				Status   string
				Findings []struct{ Check, Target, Severity, Remedy string }
			}
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("diagnose JSON: %v\n%.400s", err, out)
			}
			if code == 2 || r.Status == "fail" {
				t.Errorf("diagnose status %s, exit %d", r.Status, code)
			}
			for _, f := range r.Findings {
				if f.Severity == "fail" {
					t.Errorf("FAIL %s %s", f.Check, f.Target)
				}
				for _, ib := range []string{"ibportstate", "opensm", "sminfo", "ibstat"} {
					if strings.Contains(f.Remedy, ib) {
						t.Errorf("%s %s: InfiniBand remedy on a host without InfiniBand ports: %s", f.Check, f.Target, f.Remedy)
					}
				}
			}
		})
	}
}

// fmtValue formats a sample value as the text exposition does.
func fmtValue(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
