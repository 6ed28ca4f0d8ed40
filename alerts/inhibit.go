// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package alerts

import (
	_ "embed"
	"fmt"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/mixin"
)

// InhibitPath is the generated Alertmanager snippet, relative to the
// repository root.
const InhibitPath = "alerts/inhibit_rules.yml"

// Inhibit is inhibit_rules.yml, the snippet as rendered with
// mixin.Default().
//
//go:embed inhibit_rules.yml
var Inhibit []byte

// inhibition is one Alertmanager inhibit rule: while an alert matching
// source fires, alerts matching target with the same port labels are
// muted, because the source names the cause the target only shows.
type inhibition struct {
	why            string // the comment above the rule
	source, target string // matchers, Alertmanager syntax
	// equal are the labels both must share besides the cluster label and
	// the job; nil is one port of one host (instance, device, port).
	equal []string
}

// The fault alerts (group rdma_doctor.faults), and the cable ones among
// them, as matcher values.
const (
	faultAlerts = "RdmaLinkErrors|RdmaLinkDropped|RdmaLinkFlapping|RdmaLinkCongested|RdmaHostNicFault"
	cableAlerts = "RdmaLinkErrors|RdmaLinkDropped|RdmaLinkFlapping"
)

// inhibitions are the known overlaps between rdma_doctor's alerts. Adding
// one: a line here, a case in e2e/alertmanager_test.go, make generate.
var inhibitions = []inhibition{
	{"An InfiniBand port that no subnet manager swept stays in INIT: the missing SM is the cause, the port state its symptom.",
		`alertname="RdmaPortNoSubnetManager"`, `alertname="RdmaPortNotActive"`, nil},
	{"The same port seen by the diagnose check that judges SM presence.",
		`alertname="RdmaPortNoSubnetManager"`, `alertname="RdmaDiagnoseCheckFailing", check="sm.present"`, nil},
	{"A link below its expected rate is also the diagnose check port.rate failing for that port.",
		`alertname="RdmaPortLinkDegraded"`, `alertname="RdmaDiagnoseCheckFailing", check="port.rate"`, nil},
	// One page per fault (issue 36): the fault alerts stand for the
	// per-counter alerts of the port they were seen on.
	{"A fault alert seen on a host port stands for that port's per-counter alerts.",
		`alertname=~"` + faultAlerts + `"`, `alertname=~"RdmaPortSymbolErrors|RdmaPortLinkErrorRecovery|RdmaPortReceiveErrors|RdmaPortLinkDowned|RdmaPortNotActive|RdmaPortFlapping|RdmaPortLinkFlapping|RdmaPortTransmitWait"`, nil},
	{"A fault alert seen on a switch port stands for that port's per-counter alerts.",
		`alertname=~"` + faultAlerts + `"`, `alertname=~"RdmaFabricPortErrors|RdmaFabricPortDown|RdmaFabricPortTransmitWait"`, []string{"instance", "guid", "port"}},
	{"A NIC at fault does not page as a cable: its link's cable alerts, from either end, are its symptoms.",
		`alertname="RdmaHostNicFault"`, `alertname=~"` + cableAlerts + `"`, []string{"link"}},
	{"The NIC fault names the firmware, PCIe and devlink evidence these alerts page on alone.",
		`alertname="RdmaHostNicFault"`, `alertname=~"RdmaKernelFatalEvent|RdmaPcieAerUncorrectable|RdmaDevlinkHealthReporterError"`, []string{"instance", "device"}},
	{"A switch at fault is one page: the cable alerts of its links, where it is the switch end.",
		`alertname="RdmaSwitchFault"`, `alertname=~"` + cableAlerts + `"`, []string{"switch_guid"}},
	{"The same where the scan listed the switch as the link's remote end (an inter-switch link).",
		`alertname="RdmaSwitchFault"`, `alertname=~"` + cableAlerts + `"`, []string{"remote_guid"}},
	{"No subnet manager is one page for the fabric: the per-port SM alerts and the INIT ports are its symptoms.",
		`alertname="RdmaSubnetManagerFault"`, `alertname=~"RdmaPortNoSubnetManager|RdmaSubnetManagerNotMaster|RdmaSubnetManagerHung|RdmaSubnetManagerQueryFailing|RdmaPortNotActive"`, []string{}},
	{"A dead SM blinds the counter sweep (ibqueryerrors asks the SA for its paths): the failing sweep is its symptom.",
		`alertname="RdmaSubnetManagerFault"`, `alertname="RdmaFabricCounterSweepFailing"`, []string{}},
	{"The same for the fabric and sm collectors, which fail with it.",
		`alertname="RdmaSubnetManagerFault"`, `alertname="RdmaDoctorCollectorFailing", collector=~"fabric|sm"`, []string{}},
	{"A switch whose every link is cut leaves the scan (iblinkinfo cannot reach it): the scan and the sweep read as failing while its ports are kept unknown, symptoms of the switch fault.",
		`alertname="RdmaSwitchFault"`, `alertname=~"RdmaFabricScanFailing|RdmaFabricCounterSweepFailing"`, []string{}},
	// The diagnose checks that judge what the fault alerts page on: their
	// findings are in the fault's page and lead /diagnose as its fault
	// (diagnose/faults.go). Scoped to the cluster, as a fabric check's
	// target (GUID/port, on the fabric exporter) names no host port.
	{"While a fault pages, the diagnose checks that judge cables, port counters and states, the kernel log and the SM are in its page, not pages of their own.",
		`alertname=~"` + faultAlerts + `|RdmaSwitchFault|RdmaSubnetManagerFault"`, `alertname="RdmaDiagnoseCheckFailing", check=~"` + faultChecks + `"`, []string{}},
}

// faultChecks are the diagnose checks whose findings the fault alerts
// page on (diagnose's faults group the same findings).
const faultChecks = `fabric\\.(errors|port_down|congestion|init|link)|ctr\\..+|kernel\\.events|devlink\\.health|sm\\.(present|master)|port\\.(flap|drop|state|phys)`

// RenderInhibitRules renders the Alertmanager inhibit rules for c: a
// top-level inhibit_rules key to merge into alertmanager.yml. Every rule is
// scoped to one port (the cluster label, job, instance, device and port
// must be equal, or the labels the rule names), so a fault on one port
// never mutes another's alerts.
func RenderInhibitRules(c mixin.Config) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(inhibitHeader)
	b.WriteString("inhibit_rules:\n")
	writeInhibitRules(&b, c)
	return []byte(b.String()), nil
}

// writeInhibitRules writes the inhibit rules' list items for c.
func writeInhibitRules(b *strings.Builder, c mixin.Config) {
	for _, in := range inhibitions {
		equal := []string{"instance", "device", "port"}
		if in.equal != nil {
			equal = in.equal
		}
		equal = append([]string{c.ClusterLabel, "job"}, equal...)
		fmt.Fprintf(b, "  # %s\n", in.why)
		fmt.Fprintf(b, "  - source_matchers: [%s]\n", quoteMatchers(in.source))
		fmt.Fprintf(b, "    target_matchers: [%s]\n", quoteMatchers(in.target))
		fmt.Fprintf(b, "    equal: [%s]\n", strings.Join(equal, ", "))
	}
}

// inhibitHeader heads inhibit_rules.yml.
const inhibitHeader = `# Alertmanager inhibit rules for rdma_doctor's alerts, generated from
# alerts/inhibit.go and the mixin config (make generate; go run
# ./mixin/generate for another config). Merge the inhibit_rules list into
# alertmanager.yml (Alertmanager 0.22 or later: matchers syntax), or start
# from alerts/alertmanager.yml, which has them. See docs/monitoring.md.
`

// quoteMatchers turns `a="x", b="y"` into a YAML flow list of single-quoted
// matcher strings.
func quoteMatchers(ms string) string {
	parts := strings.Split(ms, ", ")
	for i, p := range parts {
		parts[i] = "'" + p + "'"
	}
	return strings.Join(parts, ", ")
}
