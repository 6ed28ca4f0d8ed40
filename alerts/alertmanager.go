// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package alerts

import (
	_ "embed"
	"fmt"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/mixin"
)

// AlertmanagerPath is the generated Alertmanager configuration, relative
// to the repository root.
const AlertmanagerPath = "alerts/alertmanager.yml"

// Alertmanager is alertmanager.yml as rendered with mixin.Default().
//
//go:embed alertmanager.yml
var Alertmanager []byte

// FaultClasses are the fault_class label values of the fault alerts
// (group rdma_doctor.faults), each with its own action and runbook
// section; diagnose groups its fabric findings by the same names.
var FaultClasses = []string{"cable", "host_nic", "switch", "subnet_manager", "congestion"}

// RenderAlertmanager renders a complete Alertmanager configuration for c:
// the fault alerts grouped by their class and fault identity (so the
// host's and the switch's alerts about one link are one notification),
// every other alert by its name and instance, the inhibit rules, and a
// placeholder receiver to replace.
func RenderAlertmanager(c mixin.Config) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, `# Alertmanager configuration for rdma_doctor's alerts, generated from
# alerts/alertmanager.go, alerts/inhibit.go and the mixin config (make
# generate; go run ./mixin/generate for another config). Merge it into
# yours: the route below as a sub-route of your root route (or as the
# root), the inhibit rules, and a real receiver in place of the
# placeholder. See docs/monitoring.md, "Pages per fault".
route:
  receiver: rdma-doctor
  # Alerts that are not about one fault: one group per alert and host.
  group_by: [%[1]s, alertname, instance]
  group_wait: 30s
  group_interval: 5m
  repeat_interval: 4h
  routes:
    # The fault alerts (fault_class set): one group, so one notification,
    # per fault, whichever exporters saw it. fault is the link
    # ("<switch guid>/<port>", or "<instance>/<device>/<port>" for a port no
    # fabric exporter sees), the NIC ("<instance>/<device>"), the switch
    # GUID, or "subnet_manager".
    - matchers: ['fault_class=~"%[2]s"']
      group_by: [%[1]s, fault_class, fault]
      receiver: rdma-doctor
receivers:
  # Placeholder: replace with your pager (webhook_configs, pagerduty_configs,
  # slack_configs, ...). A receiver without configurations drops what it gets.
  - name: rdma-doctor
`, c.ClusterLabel, strings.Join(FaultClasses, "|"))
	b.WriteString("inhibit_rules:\n")
	writeInhibitRules(&b, c)
	return []byte(b.String()), nil
}
