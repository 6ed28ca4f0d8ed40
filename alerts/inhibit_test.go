// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package alerts

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rdma-doctor/rdma_doctor/internal/dev/testenv"
	"github.com/rdma-doctor/rdma_doctor/mixin"
)

// TestInhibitRulesUpToDate checks the committed inhibit_rules.yml is what
// RenderInhibitRules makes of mixin.Default(); -update rewrites it.
func TestInhibitRulesUpToDate(t *testing.T) {
	got, err := RenderInhibitRules(mixin.Default())
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(filepath.Base(InhibitPath), got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(got, Inhibit) {
		t.Fatalf("%s is out of date: run make generate", InhibitPath)
	}
}

// TestInhibitRulesNameAlerts checks each rule's alertnames are alerts of
// the rules file and every label a rule matches on or keeps equal is one
// those alerts carry, so a renamed alert or label cannot leave a rule that
// silently never applies.
func TestInhibitRulesNameAlerts(t *testing.T) {
	var f struct {
		InhibitRules []struct {
			Source []string `yaml:"source_matchers"`
			Target []string `yaml:"target_matchers"`
			Equal  []string `yaml:"equal"`
		} `yaml:"inhibit_rules"`
	}
	if err := yaml.Unmarshal(Inhibit, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.InhibitRules) != len(inhibitions) {
		t.Fatalf("%d rules, want %d", len(f.InhibitRules), len(inhibitions))
	}
	// The labels each alert's series carry: those of its expression's
	// selectors as the promtool tests feed them, which every alert here
	// keeps (device and port from the target for the diagnose alert).
	carries := map[string][]string{
		"RdmaPortNoSubnetManager":  {"cluster", "job", "instance", "device", "port"},
		"RdmaPortNotActive":        {"cluster", "job", "instance", "device", "port"},
		"RdmaPortLinkDegraded":     {"cluster", "job", "instance", "device", "port"},
		"RdmaDiagnoseCheckFailing": {"cluster", "job", "instance", "device", "port", "check", "target"},
	}
	// The fault alerts carry their link's identity and the labels of the
	// end they were seen on (tests/faults.yml): a host port's or a switch
	// port's, each port alert's own.
	linkLabels := []string{"cluster", "job", "link", "switch_node", "switch_guid", "switch_port", "remote_node", "remote_guid", "remote_port", "instance", "device", "guid", "port", "end"}
	for _, a := range strings.Split(faultAlerts, "|") {
		carries[a] = linkLabels
	}
	carries["RdmaSwitchFault"] = []string{"cluster", "job", "fault", "switch_guid", "remote_guid"}
	carries["RdmaSubnetManagerFault"] = []string{"cluster", "job", "fault", "counter"}
	for _, a := range []string{"RdmaPortSymbolErrors", "RdmaPortLinkErrorRecovery", "RdmaPortReceiveErrors", "RdmaPortLinkDowned", "RdmaPortFlapping", "RdmaPortLinkFlapping", "RdmaPortTransmitWait", "RdmaSubnetManagerNotMaster", "RdmaSubnetManagerHung", "RdmaSubnetManagerQueryFailing"} {
		carries[a] = []string{"cluster", "job", "instance", "device", "port"}
	}
	for _, a := range []string{"RdmaFabricPortErrors", "RdmaFabricPortDown", "RdmaFabricPortTransmitWait"} {
		carries[a] = []string{"cluster", "job", "instance", "guid", "port"}
	}
	carries["RdmaFabricCounterSweepFailing"] = []string{"cluster", "job", "instance"}
	carries["RdmaFabricScanFailing"] = []string{"cluster", "job", "instance"}
	carries["RdmaDoctorCollectorFailing"] = []string{"cluster", "job", "instance", "collector"}
	for _, a := range []string{"RdmaKernelFatalEvent", "RdmaPcieAerUncorrectable", "RdmaDevlinkHealthReporterError"} {
		carries[a] = []string{"cluster", "job", "instance", "device"}
	}
	matcher := regexp.MustCompile(`^([a-z_]+)=~?"([^"]*)"$`)
	alerts := alertNames(t)
	// A side names one alert or several (alertname=~"A|B"); each must
	// carry the labels.
	side := func(ms []string) (names []string, labels []string) {
		for _, m := range ms {
			sm := matcher.FindStringSubmatch(m)
			if sm == nil {
				t.Errorf("matcher %q: want label=\"value\"", m)
				continue
			}
			if sm[1] == "alertname" {
				names = strings.Split(sm[2], "|")
			} else {
				labels = append(labels, sm[1])
			}
		}
		for _, n := range names {
			if !slices.Contains(alerts, n) {
				t.Errorf("matchers %v name %s, no alert of the rules file", ms, n)
			}
		}
		if len(names) == 0 {
			t.Errorf("matchers %v name no alert", ms)
		}
		return names, labels
	}
	for _, r := range f.InhibitRules {
		srcs, sl := side(r.Source)
		dsts, dl := side(r.Target)
		for _, src := range srcs {
			for _, l := range sl {
				if !slices.Contains(carries[src], l) {
					t.Errorf("%s: source matches on %s, which it does not carry", src, l)
				}
			}
			for _, dst := range dsts {
				for _, l := range r.Equal {
					if !slices.Contains(carries[src], l) || !slices.Contains(carries[dst], l) {
						t.Errorf("%s -> %s: equal label %s is not on both alerts", src, dst, l)
					}
				}
			}
		}
		for _, dst := range dsts {
			for _, l := range dl {
				if !slices.Contains(carries[dst], l) {
					t.Errorf("%s: target matches on %s, which it does not carry", dst, l)
				}
			}
		}
	}
}

// TestInhibitRulesAmtool checks the snippet, merged into a minimal
// alertmanager.yml as docs/monitoring.md says, with the real amtool.
func TestInhibitRulesAmtool(t *testing.T) {
	amtool := testenv.RequireTool(t, "amtool", "amtool not installed (Debian: apt-get install prometheus-alertmanager; .ci/run does)")
	cfg := "route:\n  receiver: \"null\"\nreceivers:\n  - name: \"null\"\n" + string(Inhibit)
	path := filepath.Join(t.TempDir(), "alertmanager.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, amtool, "check-config", path).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") || !strings.Contains(string(out), fmt.Sprintf(" - %d inhibit rules", len(inhibitions))) {
		t.Fatalf("amtool check-config: %v\n%s", err, out)
	}
}
