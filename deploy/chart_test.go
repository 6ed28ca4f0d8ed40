// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
)

var update = flag.Bool("update", false, "rewrite the chart's default-render golden and its copies of alerts/ and dashboards/")

const (
	chartDir = "helm/rdma-doctor"
	// The Kubernetes version the vendored schemas are of (schemas/generate.go).
	kubeVersion = "1.33.0"
	// The golden of the chart's default render.
	chartGolden = "testdata/chart-default.yaml"
)

func requireHelm(t *testing.T) string {
	t.Helper()
	return testenv.RequireTool(t, "helm", "helm not installed (go install helm.sh/helm/v3/cmd/helm@v3.22.0; .ci/run does)")
}

func run(t *testing.T, name string, args ...string) ([]byte, error) {
	t.Helper()
	return runFor(t, 2*time.Minute, name, args...)
}

// runFor is run with its own bound, for the slow steps (mmdebstrap
// downloads and unpacks a Debian base: minutes on a loaded machine).
func runFor(t *testing.T, limit time.Duration, name string, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

// valueFiles are the chart's toggle sets (ci/*-values.yaml, the
// chart-testing convention), by name; "default" is no file.
func valueFiles(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no values files in %s/ci: %v", chartDir, err)
	}
	out := map[string]string{"default": ""}
	for _, f := range files {
		out[strings.TrimSuffix(filepath.Base(f), "-values.yaml")] = f
	}
	return out
}

// helmTemplate renders the chart as release "rdma-doctor" in namespace
// rdma-doctor, with a values file and --set pairs.
func helmTemplate(t *testing.T, helm, values string, set ...string) ([]byte, error) {
	t.Helper()
	args := []string{"template", "rdma-doctor", chartDir, "--namespace", "rdma-doctor", "--kube-version", kubeVersion}
	if values != "" {
		args = append(args, "--values", values)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return run(t, helm, args...)
}

// splitDocs returns the non-empty YAML documents of a stream.
func splitDocs(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var docs [][]byte
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if len(n.Content) == 0 {
			continue
		}
		doc, err := yaml.Marshal(&n)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, doc)
	}
	return docs
}

// rendered is one render, its objects by "Kind name".
type rendered map[string]map[string]any

func parseRender(t *testing.T, b []byte) rendered {
	t.Helper()
	out := rendered{}
	for _, d := range splitDocs(t, b) {
		var m map[string]any
		if err := yaml.Unmarshal(d, &m); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprint(m["kind"], " ", lookup(m, "metadata", "name"))] = m
	}
	return out
}

func (r rendered) kinds() []string {
	var ks []string
	for k := range r {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestChartLint runs helm lint --strict with every values file.
func TestChartLint(t *testing.T) {
	helm := requireHelm(t)
	for name, f := range valueFiles(t) {
		args := []string{"lint", "--strict", chartDir}
		if f != "" {
			args = append(args, "--values", f)
		}
		if out, err := run(t, helm, args...); err != nil {
			t.Errorf("%s: %v\n%s", name, err, out)
		}
	}
}

// TestChartRenders renders the chart with every values file, validates each
// object against the strict vendored schemas (here and with kubeconform),
// and checks the exporter contract and the config on every render.
func TestChartRenders(t *testing.T) {
	helm := requireHelm(t)
	v := loadSchemas(t)
	dir := t.TempDir()
	var files []string
	for name, f := range valueFiles(t) {
		out, err := helmTemplate(t, helm, f)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, path)
		for _, d := range splitDocs(t, out) {
			if kind, err := v.validate(d); err != nil {
				t.Errorf("%s: %s: %v", name, kind, err)
			}
		}
		r := parseRender(t, out)
		svc := r["Service rdma-doctor"]
		sm := r["ServiceMonitor rdma-doctor"]
		if svc == nil || r["DaemonSet rdma-doctor"] == nil || r["ConfigMap rdma-doctor"] == nil {
			t.Errorf("%s: renders %v, want at least the DaemonSet, Service and ConfigMap", name, r.kinds())
			continue
		}
		pm := r["PodMonitor rdma-doctor"]
		if sm != nil && pm != nil {
			t.Errorf("%s: renders both a ServiceMonitor and a PodMonitor: every pod scraped twice", name)
		}
		for _, ds := range []string{"DaemonSet rdma-doctor", "DaemonSet rdma-doctor-fabric"} {
			if r[ds] != nil {
				t.Run(name+"/"+ds, func(t *testing.T) {
					checkExporter(t, r[ds], svc, sm)
					if pm != nil {
						checkPodMonitor(t, r[ds], pm)
					}
				})
			}
		}
		cfg, _ := lookup(r["ConfigMap rdma-doctor"], "data", "rdma_doctor.yml").(string)
		if _, err := config.Parse([]byte(cfg)); err != nil {
			t.Errorf("%s: rdma_doctor.yml in the ConfigMap: %v\n%s", name, err, cfg)
		}
	}
	kubeconform(t, files)
}

// checkPodMonitor checks what the schema cannot: the PodMonitor finds the
// DaemonSet's pods, scrapes their metrics port, names the job the alerts
// expect from a pod label, and carries the release label
// kube-prometheus-stack selects on.
func checkPodMonitor(t *testing.T, ds, pm map[string]any) {
	t.Helper()
	podLabels := lookup(ds, "spec", "template", "metadata", "labels").(map[string]any)
	for k, v := range lookup(pm, "spec", "selector", "matchLabels").(map[string]any) {
		if podLabels[k] != v {
			t.Errorf("PodMonitor selector %s=%v does not match the pods", k, v)
		}
	}
	jobLabel, _ := lookup(pm, "spec", "jobLabel").(string)
	if podLabels[jobLabel] != "rdma_doctor" {
		t.Errorf(`PodMonitor jobLabel %q gives job %v; the alerts expect job="rdma_doctor"`, jobLabel, podLabels[jobLabel])
	}
	if port := lookup(pm, "spec", "podMetricsEndpoints", "0", "port"); port == nil ||
		port != lookup(ds, "spec", "template", "spec", "containers", "0", "ports", "0", "name") {
		t.Errorf("PodMonitor port %v is not the container's metrics port", port)
	}
	if lookup(pm, "spec", "podMetricsEndpoints", "0", "relabelings", "0", "targetLabel") != "instance" {
		t.Error("PodMonitor does not set instance to the node name, as the ServiceMonitor does")
	}
	if lookup(pm, "metadata", "labels", "release") == nil {
		t.Error("PodMonitor has no release label (kube-prometheus-stack selects on it)")
	}
}

// kubeconform validates the rendered files with the real kubeconform,
// against the vendored schemas laid out the way it looks schemas up
// ({kind}-{group}-{version}.json), each a $ref into its bundle.
func kubeconform(t *testing.T, files []string) {
	t.Helper()
	kc := testenv.RequireTool(t, "kubeconform", "kubeconform not installed (go install github.com/yannh/kubeconform/cmd/kubeconform@v0.7.0; .ci/run does)")
	dir := t.TempDir()
	for _, bundle := range []string{"kubernetes.json", "monitoring.coreos.com.json"} {
		b, err := os.ReadFile(filepath.Join("schemas", bundle))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Definitions map[string]map[string]any `json:"definitions"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		for name, def := range doc.Definitions {
			var apiVersion, kind string
			if bundle == "monitoring.coreos.com.json" {
				apiVersion, kind = "monitoring.coreos.com/v1", name
			} else {
				gvks, _ := def["x-kubernetes-group-version-kind"].([]any)
				if len(gvks) != 1 {
					continue
				}
				g := gvks[0].(map[string]any)
				apiVersion, kind = g["version"].(string), g["kind"].(string)
				if grp := g["group"].(string); grp != "" {
					apiVersion = grp + "/" + apiVersion
				}
			}
			// kubeconform's KindSuffix: the group's first label, then the version.
			grp, ver, ok := strings.Cut(apiVersion, "/")
			suffix := "-" + grp
			if ok {
				suffix = "-" + strings.Split(grp, ".")[0] + "-" + ver
			}
			schema, err := json.Marshal(map[string]any{
				"$schema":     "http://json-schema.org/draft-04/schema#",
				"$ref":        "#/definitions/" + name,
				"definitions": doc.Definitions,
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, strings.ToLower(kind)+suffix+".json"), schema, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	args := append([]string{"-strict", "-summary", "-output", "text",
		"-schema-location", dir + "/{{ .ResourceKind }}{{ .KindSuffix }}.json"}, files...)
	out, err := run(t, kc, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// -summary ends with "Summary: N resources found in M files - Valid: N, Invalid: 0, Errors: 0, Skipped: 0".
	if !bytes.Contains(out, []byte("Invalid: 0, Errors: 0, Skipped: 0")) || bytes.Contains(out, []byte("Valid: 0,")) {
		t.Errorf("kubeconform:\n%s", out)
	}
	t.Logf("kubeconform: %s", bytes.TrimSpace(out))
}

// TestChartGolden compares the default render with testdata/ (-update
// rewrites it): a change to what a plain helm install deploys shows in
// review.
func TestChartGolden(t *testing.T) {
	got, err := helmTemplate(t, requireHelm(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(chartGolden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(chartGolden)
	if err != nil {
		t.Fatalf("%v (go test ./deploy -run TestChartGolden -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the chart's default render differs from %s: go test ./deploy -run TestChartGolden -update, and check the diff", chartGolden)
	}
	r := parseRender(t, got)
	want2 := []string{"ConfigMap rdma-doctor", "DaemonSet rdma-doctor", "PrometheusRule rdma-doctor",
		"Service rdma-doctor", "ServiceAccount rdma-doctor", "ServiceMonitor rdma-doctor"}
	if !slices.Equal(r.kinds(), want2) {
		t.Errorf("default render has %v, want %v", r.kinds(), want2)
	}
	checkUnprivileged(t, r["DaemonSet rdma-doctor"])
	if img := lookup(r["DaemonSet rdma-doctor"], "spec", "template", "spec", "containers", "0", "image"); img != "ghcr.io/rdma-doctor/rdma_doctor:"+version(t) {
		t.Errorf("image %v: want the plain image of VERSION %s", img, version(t))
	}
}

func version(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestChartVersion keeps Chart.yaml's appVersion (the default image tag) at
// the repository's VERSION.
func TestChartVersion(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `yaml:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.AppVersion != version(t) {
		t.Errorf("Chart.yaml appVersion %q, VERSION %q", c.AppVersion, version(t))
	}
}

// podOf returns a rendered DaemonSet's pod spec and first container.
func podOf(t *testing.T, r rendered, name string) (pod, c map[string]any) {
	t.Helper()
	ds := r["DaemonSet "+name]
	if ds == nil {
		t.Fatalf("no DaemonSet %s in %v", name, r.kinds())
	}
	pod = lookup(ds, "spec", "template", "spec").(map[string]any)
	return pod, lookup(pod, "containers", "0").(map[string]any)
}

func hostPaths(pod map[string]any) []string {
	var out []string
	for _, vol := range pod["volumes"].([]any) {
		if p := lookup(vol, "hostPath", "path"); p != nil {
			out = append(out, p.(string))
		}
	}
	slices.Sort(out)
	return out
}

// TestChartToggles checks what each toggle set turns on, and that the
// default stays as it is.
func TestChartToggles(t *testing.T) {
	helm := requireHelm(t)
	files := valueFiles(t)
	render := func(t *testing.T, name string) rendered {
		t.Helper()
		f, ok := files[name]
		if !ok {
			t.Fatalf("no ci/%s-values.yaml", name)
		}
		out, err := helmTemplate(t, helm, f)
		if err != nil {
			t.Fatal(err)
		}
		return parseRender(t, out)
	}
	const plain, tools = "ghcr.io/rdma-doctor/rdma_doctor:0.1.0", "ghcr.io/rdma-doctor/rdma_doctor:0.1.0-tools"
	devices := []string{"/boot", "/dev/infiniband", "/proc", "/sys"}

	t.Run("nfd", func(t *testing.T) {
		pod, _ := podOf(t, render(t, "nfd"), "rdma-doctor")
		if lookup(pod, "nodeSelector", "feature.node.kubernetes.io/pci-15b3.present") != "true" ||
			lookup(pod, "nodeSelector", "kubernetes.io/os") != "linux" {
			t.Errorf("nodeSelector %v: want the NFD Mellanox label and linux", pod["nodeSelector"])
		}
	})
	t.Run("sminfo", func(t *testing.T) {
		pod, c := podOf(t, render(t, "sminfo"), "rdma-doctor")
		if c["image"] != tools || lookup(pod, "securityContext", "runAsUser") != 0 ||
			lookup(c, "resources", "limits", "rdma/hca_shared_devices_a") != "1" || !slices.Equal(hostPaths(pod), devices) {
			t.Errorf("sminfo: image %v, user %v, limits %v, host paths %v: want the tools image as root with the RDMA devices",
				c["image"], lookup(pod, "securityContext", "runAsUser"), lookup(c, "resources", "limits"), hostPaths(pod))
		}
		if lookup(c, "securityContext", "privileged") != false {
			t.Error("sminfo runs privileged; root and the device plugin suffice")
		}
	})
	t.Run("probe", func(t *testing.T) {
		r := render(t, "probe")
		pod, c := podOf(t, r, "rdma-doctor")
		if c["image"] != tools || lookup(pod, "securityContext", "runAsNonRoot") != true ||
			!slices.Equal(lookup(c, "securityContext", "capabilities", "add").([]any), []any{"IPC_LOCK"}) ||
			lookup(c, "resources", "limits", "rdma/hca_shared_devices_a") != "1" {
			t.Errorf("probe: image %v, security %v, limits %v: want the tools image, non-root with IPC_LOCK and the RDMA devices",
				c["image"], c["securityContext"], lookup(c, "resources", "limits"))
		}
		cfg, err := config.Parse([]byte(lookup(r["ConfigMap rdma-doctor"], "data", "rdma_doctor.yml").(string)))
		if err != nil {
			t.Fatal(err)
		}
		if !cfg.Probe.Enabled || time.Duration(cfg.Probe.Interval) != 10*time.Minute {
			t.Errorf("probe config %+v: want enabled by the toggle, with the values file's interval", cfg.Probe)
		}
	})
	t.Run("fabric", func(t *testing.T) {
		r := render(t, "fabric")
		pod, c := podOf(t, r, "rdma-doctor-fabric")
		if lookup(pod, "nodeSelector", "rdma-doctor/subnet-manager") != "true" || c["image"] != tools ||
			!slices.Contains(c["args"].([]any), any("--collector.fabric")) || lookup(pod, "securityContext", "runAsUser") != 0 {
			t.Errorf("fabric DaemonSet: nodeSelector %v, image %v, args %v: want the SM hosts, the tools image, --collector.fabric, root",
				pod["nodeSelector"], c["image"], c["args"])
		}
		// The main DaemonSet leaves the SM hosts to the fabric one: one
		// exporter per node, one target per instance.
		main, mc := podOf(t, r, "rdma-doctor")
		term := lookup(main, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms", "0", "matchExpressions", "0")
		if lookup(term, "key") != "rdma-doctor/subnet-manager" || lookup(term, "operator") != "NotIn" ||
			slices.Contains(mc["args"].([]any), any("--collector.fabric")) || mc["image"] != plain {
			t.Errorf("main DaemonSet: affinity term %v, args %v, image %v: want it off the SM hosts, without the fabric collector",
				term, mc["args"], mc["image"])
		}
		// The fabric view's memory grows with the fabric: limits of its
		// own (values.yaml fabric.resources, from TestFabricRenderPeak
		// and e2e TestFabricScrapeMemoryOnIbsim), the main pod's kept.
		if fl, ml := lookup(c, "resources", "limits", "memory"), lookup(mc, "resources", "limits", "memory"); fl != "512Mi" || ml != "256Mi" {
			t.Errorf("memory limits: fabric %v, main %v: want 512Mi (fabric.resources) and 256Mi", fl, ml)
		}
		fs := lookup(r["DaemonSet rdma-doctor-fabric"], "spec", "selector", "matchLabels", "app.kubernetes.io/component")
		ms := lookup(r["DaemonSet rdma-doctor"], "spec", "selector", "matchLabels", "app.kubernetes.io/component")
		if fs == ms {
			t.Errorf("both DaemonSets select component %v: their selectors overlap", fs)
		}
	})
	t.Run("rootreads", func(t *testing.T) {
		pod, c := podOf(t, render(t, "rootreads"), "rdma-doctor")
		if lookup(c, "securityContext", "privileged") != true || lookup(pod, "securityContext", "runAsUser") != 0 ||
			!slices.Contains(hostPaths(pod), "/dev/kmsg") || c["image"] != plain {
			t.Errorf("rootReads: security %v, host paths %v, image %v: want privileged root with /dev/kmsg, plain image",
				c["securityContext"], hostPaths(pod), c["image"])
		}
	})
	t.Run("kernelConfig off", func(t *testing.T) {
		// Hosts without /boot: the volume (type Directory) would keep the
		// pod from starting, so the chart can leave it out.
		out, err := helmTemplate(t, helm, "", "kernelConfig.enabled=false")
		if err != nil {
			t.Fatal(err)
		}
		pod, c := podOf(t, parseRender(t, out), "rdma-doctor")
		for _, m := range c["volumeMounts"].([]any) {
			if lookup(m, "name") == "boot" {
				t.Errorf("kernelConfig.enabled=false still mounts %v", m)
			}
		}
		if hp := hostPaths(pod); !slices.Equal(hp, []string{"/proc", "/sys"}) {
			t.Errorf("kernelConfig.enabled=false: host paths %v, want /proc and /sys", hp)
		}
	})
	t.Run("dashboards", func(t *testing.T) {
		r := render(t, "dashboards")
		want, err := filepath.Glob(filepath.Join("..", "dashboards", "*.json"))
		if err != nil || len(want) == 0 {
			t.Fatal("no dashboards", err)
		}
		for _, f := range want {
			name := strings.TrimSuffix(filepath.Base(f), ".json")
			cm := r["ConfigMap rdma-doctor-dashboard-"+name]
			b, _ := os.ReadFile(f)
			if lookup(cm, "metadata", "labels", "grafana_dashboard") != "1" || lookup(cm, "data", filepath.Base(f)) != string(b) {
				t.Errorf("dashboard %s: ConfigMap %v does not carry it with the sidecar label", name, cm != nil)
			}
		}
	})
	t.Run("no-operator", func(t *testing.T) {
		r := render(t, "no-operator")
		if r["ServiceMonitor rdma-doctor"] != nil || r["PodMonitor rdma-doctor"] != nil || r["PrometheusRule rdma-doctor"] != nil {
			t.Errorf("renders %v: want no prometheus-operator objects", r.kinds())
		}
	})
	t.Run("podmonitor", func(t *testing.T) {
		// The PodMonitor in the ServiceMonitor's place, with its interval
		// and timeout, finding the pods of both DaemonSets.
		r := render(t, "podmonitor")
		pm := r["PodMonitor rdma-doctor"]
		if pm == nil || r["ServiceMonitor rdma-doctor"] != nil {
			t.Fatalf("renders %v: want a PodMonitor and no ServiceMonitor", r.kinds())
		}
		ep := lookup(pm, "spec", "podMetricsEndpoints", "0")
		if lookup(ep, "interval") != "1m" || lookup(ep, "scrapeTimeout") != "50s" {
			t.Errorf("PodMonitor endpoint %v: want serviceMonitor's interval 1m and scrapeTimeout 50s", ep)
		}
		if l := lookup(pm, "metadata", "labels"); lookup(l, "release") != "kube-prometheus-stack" || lookup(l, "team") != "hpc" {
			t.Errorf("PodMonitor labels %v: want release=kube-prometheus-stack and team=hpc", l)
		}
		for _, ds := range []string{"rdma-doctor", "rdma-doctor-fabric"} {
			if r["DaemonSet "+ds] == nil {
				t.Fatalf("no DaemonSet %s in %v", ds, r.kinds())
			}
			checkPodMonitor(t, r["DaemonSet "+ds], pm)
		}
	})
	t.Run("all", func(t *testing.T) {
		r := render(t, "all")
		pod, c := podOf(t, r, "rdma-doctor")
		if pod["priorityClassName"] != "system-node-critical" || c["image"] != "ghcr.io/rdma-doctor/rdma_doctor:0.1.0-rc.1-tools" {
			t.Errorf("priority class %v, image %v", pod["priorityClassName"], c["image"])
		}
		for _, k := range []string{"ServiceMonitor rdma-doctor", "PrometheusRule rdma-doctor"} {
			if l := lookup(r[k], "metadata", "labels"); lookup(l, "release") != "prometheus" || lookup(l, "team") != "hpc" {
				t.Errorf("%s labels %v: want release=prometheus and team=hpc", k, l)
			}
		}
	})
}

// TestChartRefuses checks the settings the chart refuses with a message
// rather than rendering something that cannot work.
func TestChartRefuses(t *testing.T) {
	helm := requireHelm(t)
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"fabric.enabled=true"}, "fabric.enabled needs fabric.nodeSelector"},
		{[]string{"fabric.enabled=true", "fabric.nodeSelector.sm=yes", "affinity.nodeAffinity.x=y"}, "move affinity.nodeAffinity into nodeSelector"},
		{[]string{"podMonitor.enabled=true"}, "podMonitor.enabled and serviceMonitor.enabled"},
	} {
		_, err := helmTemplate(t, helm, "", tc.set...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %v: %v, want an error saying %q", tc.set, err, tc.want)
		}
	}
}

// chartCopies are the files the chart carries from elsewhere in the
// repository (Helm reads only files inside the chart), chart path to source.
func chartCopies(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{
		filepath.Join(chartDir, "files", "rdma_doctor.rules.yml"): filepath.Join("..", "alerts", "rdma_doctor.rules.yml"),
		filepath.Join(chartDir, "files", "alertmanager.yml"):      filepath.Join("..", "alerts", "alertmanager.yml"),
	}
	dashboards, err := filepath.Glob(filepath.Join("..", "dashboards", "*.json"))
	if err != nil || len(dashboards) == 0 {
		t.Fatalf("no dashboards: %v", err)
	}
	for _, d := range dashboards {
		out[filepath.Join(chartDir, "files", "dashboards", filepath.Base(d))] = d
	}
	return out
}

// TestChartCopiesUpToDate keeps the chart's copies of the rules and the
// dashboards identical to their sources (-update rewrites them; make
// generate does), and the PrometheusRule it renders carrying every rule.
func TestChartCopiesUpToDate(t *testing.T) {
	copies := chartCopies(t)
	if *update {
		stale, _ := filepath.Glob(filepath.Join(chartDir, "files", "dashboards", "*.json"))
		for _, f := range stale {
			if _, ok := copies[f]; !ok {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
			}
		}
		for dst, src := range copies {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for dst, src := range copies {
		a, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(dst); err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s is not a copy of %s: make generate (go test ./deploy -run TestChartCopiesUpToDate -update)", dst, src)
		}
	}
	have, _ := filepath.Glob(filepath.Join(chartDir, "files", "dashboards", "*.json"))
	for _, f := range have {
		if _, ok := copies[f]; !ok {
			t.Errorf("%s has no source in dashboards/: make generate", f)
		}
	}

	out, err := helmTemplate(t, requireHelm(t), "")
	if err != nil {
		t.Fatal(err)
	}
	var src, got struct {
		Groups []any `yaml:"groups"`
	}
	b, err := os.ReadFile(filepath.Join("..", "alerts", "rdma_doctor.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &src); err != nil {
		t.Fatal(err)
	}
	spec, _ := yaml.Marshal(lookup(parseRender(t, out)["PrometheusRule rdma-doctor"], "spec"))
	if err := yaml.Unmarshal(spec, &got); err != nil {
		t.Fatal(err)
	}
	if len(src.Groups) == 0 || fmt.Sprint(src.Groups) != fmt.Sprint(got.Groups) {
		t.Error("the chart's PrometheusRule does not carry alerts/rdma_doctor.rules.yml's groups unchanged")
	}
}

// TestChartReadme: `helm show readme` gives the chart's README, which names
// every top-level value of values.yaml; and the ServiceMonitor's default
// scrapeTimeout is one Prometheus accepts (at most the interval) and above
// the exporter's default --scrape.timeout, as values.yaml says.
func TestChartReadme(t *testing.T) {
	helm := requireHelm(t)
	out, err := run(t, helm, "show", "readme", chartDir)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(bytes.TrimSpace(out)) == 0 || !bytes.Equal(bytes.TrimSpace(out), bytes.TrimSpace(readme)) {
		t.Fatalf("helm show readme:\n%s\nwant the chart's README.md", out)
	}
	b, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	for k := range values {
		if !bytes.Contains(readme, []byte("`"+k)) {
			t.Errorf("the chart's README does not name the value %s", k)
		}
	}
	interval, err1 := time.ParseDuration(fmt.Sprint(lookup(values, "serviceMonitor", "interval")))
	timeout, err2 := time.ParseDuration(fmt.Sprint(lookup(values, "serviceMonitor", "scrapeTimeout")))
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	const exporterDefault = 10 * time.Second // cmd/rdma_doctor --scrape.timeout
	if timeout > interval || timeout <= exporterDefault {
		t.Errorf("serviceMonitor.scrapeTimeout %v with interval %v: want at most the interval and above the exporter's %v", timeout, interval, exporterDefault)
	}
}
