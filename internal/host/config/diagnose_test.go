// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestDiagnoseDefaults(t *testing.T) {
	c, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &c.Diagnose
	if d.SampleInterval() != 30*time.Second || d.HistoryWindow() != 10*time.Minute {
		t.Errorf("interval %v window %v, want 30s and 10m", d.SampleInterval(), d.HistoryWindow())
	}
	if d.Policies.KernelFloor.Floor() != "5.4" || d.Policies.Governor() != "performance" {
		t.Errorf("policy defaults: kernel %q governor %q", d.Policies.KernelFloor.Floor(), d.Policies.Governor())
	}
	l := d.CounterLimit("symbol_error")
	if l.WarnAbove == nil || *l.WarnAbove != 0 || l.FailAbove == nil || *l.FailAbove != 10 {
		t.Errorf("symbol_error default limit %+v", l)
	}
	if m := d.Policies.SysctlMinimums(); m["net.core.rmem_max"] != 4194304 || len(m) != 3 {
		t.Errorf("sysctl defaults %v", m)
	}
	if p := d.Thresholds.Probe.Effective(); p.LoopbackLatencyUS != 2 || p.SwitchLatencyUS != 5 || p.MinBandwidthRatio != 0.9 {
		t.Errorf("probe defaults %+v", p)
	}
	if d.Disabled("port.rate") {
		t.Error("nothing is disabled by default")
	}
}

func TestDiagnoseParse(t *testing.T) {
	c, err := Parse([]byte(`
diagnose:
  interval: 15s
  window: 5m
  disable: [ipoib.ipv6, "probe.*"]
  expected_devices: 8
  link_layers:
    - {hca_type: MT4129, link_layer: infiniband}
    - {device: mlx5_bond_0, port: 1, link_layer: Ethernet}
  firmware:
    - {board_id: MT_0000000838, minimum: 28.39.1002}
    - {hca_type: MT4123, allowed: [20.41.1000]}
  thresholds:
    counters:
      symbol_error: {warn_above: 5}
    probe: {loopback_latency_us: 3}
  policies:
    kernel_floor: "off"
    ipoib_mode: connected
    ipoib_ipv6: disabled
    expect_traffic: true
    memlock_min_kib: 1024
    sysctls: {net.core.rmem_max: 16777216}
    rdma_cgroup_limits:
      - {cgroup: /slurm, device: "*", hca_handle: 64, hca_object: max}
      - {cgroup: /slurm/job_1, device: mlx5_0, hca_handle: 0, hca_object: 2147483646}
`))
	if err != nil {
		t.Fatal(err)
	}
	d := &c.Diagnose
	if d.SampleInterval() != 15*time.Second || d.HistoryWindow() != 5*time.Minute {
		t.Errorf("interval %v window %v", d.SampleInterval(), d.HistoryWindow())
	}
	if !d.Disabled("ipoib.ipv6") || !d.Disabled("probe.latency") || d.Disabled("port.rate") {
		t.Error("disable patterns not applied")
	}
	if d.Disable[1].Line != 5 {
		t.Errorf("pattern line %d, want 5", d.Disable[1].Line)
	}
	if d.LinkLayers[0].LinkLayer != "InfiniBand" {
		t.Errorf("link layer not normalised: %q", d.LinkLayers[0].LinkLayer)
	}
	if d.Firmware[0].Minimum != "28.39.1002" || d.Firmware[1].Allowed[0] != "20.41.1000" || d.Firmware[1].Line != 12 {
		t.Errorf("firmware %+v", d.Firmware)
	}
	l := d.CounterLimit("symbol_error")
	if l.WarnAbove == nil || *l.WarnAbove != 5 || l.FailAbove != nil {
		t.Errorf("a configured limit replaces the default as a whole: %+v", l)
	}
	if d.Policies.KernelFloor.Floor() != "" || d.Policies.IPoIBMode != "connected" || *d.Policies.MemlockMinKiB != 1024 {
		t.Errorf("policies %+v", d.Policies)
	}
	if m := d.Policies.SysctlMinimums(); m["net.core.rmem_max"] != 16777216 || m["net.core.wmem_max"] != 4194304 {
		t.Errorf("sysctl overlay %v", m)
	}
	if p := d.Thresholds.Probe.Effective(); p.LoopbackLatencyUS != 3 || p.SwitchLatencyUS != 5 {
		t.Errorf("probe %+v", p)
	}
	if r := d.Policies.RDMACgroupLimits; len(r) != 2 || r[0].Cgroup != "/slurm" || r[0].Device != "*" || *r[0].HCAHandle != 64 ||
		*r[0].HCAObject != RDMAUnlimited || *r[1].HCAHandle != 0 || *r[1].HCAObject != RDMACountMax || r[1].Line != 26 {
		t.Errorf("rdma cgroup limits %+v", r)
	}
}

// TestDiagnoseErrors: every mistake is an error naming the line (and the
// key or value), including inside the types that decode themselves, where
// the decoder's own KnownFields does not reach.
func TestDiagnoseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"diagnose:\n  intervall: 30s\n", "line 2: unknown key \"intervall\""},
		{"diagnose:\n  interval: 30\n", "line 2"},
		{"diagnose:\n  interval: 10ms\n", "line 2: duration \"10ms\""},
		{"diagnose:\n  interval: 1m\n  window: 30s\n", "line 3: diagnose.window"},
		{"diagnose:\n  disable: [\"port.[\"]\n", "line 2: check pattern"},
		{"diagnose:\n  disable: [Port.Rate]\n", "line 2: check pattern \"Port.Rate\""},
		{"diagnose:\n  expected_devices: -1\n", "line 2: diagnose.expected_devices"},
		{"diagnose:\n  fabric_topology: \"\"\n", "line 2: diagnose.fabric_topology: empty"},
		{"diagnose:\n  fabric_topology: [a]\n", "line 2"},
		{"diagnose:\n  expected_devices: two\n", "line 2"},
		{"diagnose:\n  firmware:\n    - {board_id: X, hca_type: Y, minimum: 1.2}\n", "line 3: diagnose.firmware: exactly one"},
		{"diagnose:\n  firmware:\n    - {board_id: X}\n", "line 3: diagnose.firmware: minimum or allowed"},
		{"diagnose:\n  firmware:\n    - {board_id: X, minimum: 28.x}\n", "line 3: firmware version \"28.x\""},
		{"diagnose:\n  firmware:\n    - board_id: X\n      minimun: 1.2\n", "line 4: unknown key \"minimun\""},
		{"diagnose:\n  link_layers:\n    - {device: mlx5_0, link_layer: IB}\n", "line 3: link_layer \"IB\""},
		{"diagnose:\n  link_layers:\n    - {port: 1, hca_type: MT4129, link_layer: Ethernet}\n", "line 3: diagnose.link_layers: port needs device"},
		{"diagnose:\n  link_layers:\n    - {device: mlx5_0}\n", "line 3: diagnose.link_layers: link_layer is required"},
		{"diagnose:\n  link_layers:\n    - {device: mlx5_0, hca_type: X, link_layer: Ethernet}\n", "exactly one of device"},
		{"diagnose:\n  thresholds:\n    counters:\n      symbol_errors: {warn_above: 1}\n", "line 4: thresholds.counters: unknown counter \"symbol_errors\""},
		{"diagnose:\n  thresholds:\n    counters:\n      symbol_error: {warn_abov: 1}\n", "line 4: unknown key \"warn_abov\""},
		{"diagnose:\n  thresholds:\n    counters:\n      symbol_error: {warn_above: -1}\n", "line 4"},
		{"diagnose:\n  thresholds:\n    counters:\n      symbol_error: {warn_above: 20, fail_above: 10}\n", "line 4: thresholds.counters.symbol_error: warn_above 20 is above fail_above 10"},
		{"diagnose:\n  thresholds:\n    counters: [1]\n", "line 3"},
		{"diagnose:\n  thresholds:\n    probe: {min_bandwidth_ratio: 1.5}\n", "line 3: diagnose.thresholds.probe"},
		{"diagnose:\n  thresholds:\n    prob: {}\n", "line 3: unknown key \"prob\""},
		{"diagnose:\n  policies:\n    kernel_floor: latest\n", "line 3: kernel_floor \"latest\""},
		{"diagnose:\n  policies:\n    ipoib_mode: cm\n", "line 3: ipoib_mode \"cm\": want one of auto, connected, datagram"},
		{"diagnose:\n  policies:\n    ipoib_ipv6: off\n", "line 3: ipoib_ipv6"},
		{"diagnose:\n  policies:\n    sysctls: {rmem_max: 1}\n", "line 3: diagnose.policies.sysctls: \"rmem_max\""},
		{"diagnose:\n  policies:\n    hugepages: {size: 2048}\n", "line 3: unknown key \"size\""},
		{"diagnose:\n  policies:\n    rdma_cgroup_limits:\n      - {cgroup: /, device: mlx5_0, hca_handle: 1, hca_object: 1}\n", "line 4: diagnose.policies.rdma_cgroup_limits: cgroup / is the root"},
		{"diagnose:\n  policies:\n    rdma_cgroup_limits:\n      - {cgroup: slurm, device: mlx5_0, hca_handle: 1, hca_object: 1}\n", "line 4: diagnose.policies.rdma_cgroup_limits: cgroup \"slurm\""},
		{"diagnose:\n  policies:\n    rdma_cgroup_limits:\n      - {cgroup: /a/../b, device: mlx5_0, hca_handle: 1, hca_object: 1}\n", "cgroup \"/a/../b\""},
		{"diagnose:\n  policies:\n    rdma_cgroup_limits:\n      - {cgroup: /a, device: \"mlx5 0\", hca_handle: 1, hca_object: 1}\n", "line 4: diagnose.policies.rdma_cgroup_limits: device \"mlx5 0\""},
		{"diagnose:\n  policies:\n    rdma_cgroup_limits:\n      - {cgroup: /a, device: mlx5_*, hca_handle: 1, hca_object: 1}\n", "device \"mlx5_*\""},
		{"diagnose:\n  policies:\n    rdma_cgroup_limits:\n      - {cgroup: /a, device: mlx5_0, hca_handle: 1}\n", "line 4: diagnose.policies.rdma_cgroup_limits: hca_handle and hca_object are both required"},
		{"diagnose:\n  policies:\n    rdma_cgroup_limits:\n      - {cgroup: /a, device: mlx5_0, hca_handle: -1, hca_object: 1}\n", "line 4: rdma cgroup limit \"-1\": want max or a count from 0 to 2147483646"},
		{"diagnose:\n  policies:\n    rdma_cgroup_limits:\n      - {cgroup: /a, device: mlx5_0, hca_handle: 2147483647, hca_object: 1}\n", "rdma cgroup limit \"2147483647\""},
		{"diagnose:\n  policies:\n    rdma_cgroup_limits:\n      - {cgroup: /a, device: mlx5_0, hca_handle: unlimited, hca_object: 1}\n", "rdma cgroup limit \"unlimited\""},
		{"diagnose:\n  policies:\n    rdma_cgroup_limits:\n      - {cgroup: /a, device: mlx5_0, hca_handles: 1, hca_object: 1}\n", "line 4: unknown key \"hca_handles\""},
		{"diagnose:\n  policies:\n    rdma_cgroup_limits:\n      - {cgroup: /a, device: mlx5_0, hca_handle: 1, hca_object: 1}\n      - {cgroup: /a, device: mlx5_0, hca_handle: 2, hca_object: 1}\n", "line 5: diagnose.policies.rdma_cgroup_limits: /a mlx5_0 is already set on line 4"},
	} {
		_, err := Parse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q)\n  = %v\n  want error containing %q", tc.in, err, tc.want)
		}
	}
}

// TestDiagnoseLoadOneLine: a bad diagnose section stops start-up with one
// line naming the file and the line.
func TestDiagnoseLoadOneLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yml")
	if err := os.WriteFile(p, []byte("diagnose:\n  firmware:\n    - {board_id: X, minimum: bad}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("Load error should be one line naming the file and line: %q", err)
	}
}

func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"28.39.1002", "28.39.1002", 0},
		{"28.39.1002", "28.41.1000", -1},
		{"28.41.1000", "28.39.1002", 1},
		{"20.9.1", "20.10.0", -1}, // numeric, not textual
		{"5.4", "5.4.0", 0},
		{"5.15.0", "5.4", 1},
		{"4.18.0-553.el8", "5.4", -1},
		{"5.4.0-150-generic", "5.4", 1}, // text after the numbers sorts after
		{"007", "7", 0},
		{"99999999999999999999999", "1", 1}, // no overflow
	} {
		if got := CompareVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// examplePath is the shipped example configuration.
const examplePath = "../../../deploy/rdma_doctor.example.yml"

// TestExampleConfig parses the shipped example strictly and checks that it
// documents every key of the Config type, so a new key cannot ship without
// an example.
func TestExampleConfig(t *testing.T) {
	b, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(b); err != nil {
		t.Fatalf("%s does not parse: %v", examplePath, err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	nodeKeys(root.Content[0], "", have)
	want := map[string]bool{}
	typeKeys(reflect.TypeFor[Config](), "", want)
	var missing []string
	for k := range want {
		if !have[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%s does not document these keys:\n  %s", examplePath, strings.Join(missing, "\n  "))
	}
	if len(want) < 40 {
		t.Errorf("only %d keys found in the Config type: the walk is broken", len(want))
	}
}

// typeKeys lists the YAML key paths of a type: struct fields by their yaml
// tag, "[]" for list elements and "*" for map keys.
func typeKeys(t reflect.Type, prefix string, out map[string]bool) {
	walkType(t, prefix, func(p string, _ reflect.Kind) { out[p] = true })
}

// walkType calls visit with the key path and kind of every field, list
// element and map value below a type.
func walkType(t reflect.Type, prefix string, visit func(path string, kind reflect.Kind)) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			p := tag
			if prefix != "" {
				p = prefix + "." + tag
			}
			ft := t.Field(i).Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			visit(p, ft.Kind())
			walkType(ft, p, visit)
		}
	case reflect.Slice:
		walkType(t.Elem(), prefix+"[]", visit)
	case reflect.Map:
		walkType(t.Elem(), prefix+".*", visit)
	}
}

// nodeKeys lists the key paths present in a YAML tree, in typeKeys' form.
// A mapping under a map-typed key (counters, sysctls) has free keys: they
// are written as "*" by the caller's knowledge of which keys are maps.
func nodeKeys(n *yaml.Node, prefix string, out map[string]bool) {
	switch n.Kind {
	case yaml.MappingNode:
		free := freeKeyMaps[prefix]
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if free {
				k = "*"
			}
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out[p] = true
			nodeKeys(n.Content[i+1], p, out)
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			nodeKeys(c, prefix+"[]", out)
		}
	}
}

// freeKeyMaps are the map-typed keys whose children are names, not fields.
var freeKeyMaps = func() map[string]bool {
	m := map[string]bool{}
	walkType(reflect.TypeFor[Config](), "", func(p string, k reflect.Kind) {
		if k == reflect.Map {
			m[p] = true
		}
	})
	return m
}()

func FuzzParseDiagnose(f *testing.F) {
	if b, err := os.ReadFile(examplePath); err == nil {
		f.Add(b)
	}
	f.Add([]byte("diagnose:\n  thresholds:\n    counters:\n      symbol_error: {warn_above: 0, fail_above: 10}\n"))
	f.Add([]byte("diagnose:\n  firmware:\n    - {hca_type: MT4123, allowed: [20.41.1000]}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			return
		}
		// What parsed must be usable without panics.
		d := &c.Diagnose
		_ = d.SampleInterval() + d.HistoryWindow()
		for _, name := range CounterLimitNames() {
			_ = d.CounterLimit(name)
		}
		for _, fw := range d.Firmware {
			_ = CompareVersions("1.2.3", string(fw.Minimum))
		}
		_ = d.Policies.SysctlMinimums()
	})
}
