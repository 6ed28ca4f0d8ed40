// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestFabricRoutesOnIbsim: on the simulated fat tree under the real
// opensm, rdma_fabric_port_routes equals, switch by switch and port by
// port, the channel-adapter LIDs that ibroute prints for that switch.
func TestFabricRoutesOnIbsim(t *testing.T) {
	requireTool(t, "ibroute")
	requireTool(t, "dump_fts")
	s := startSimFabric(t)
	addr, logs := serveFabric(t, s)
	body := metricsWhen(t, addr, logs, "a whole route read", func(b string) bool {
		v, ok := sample(b, "rdma_fabric_routes_read_success")
		return ok && v == 1
	})
	switches := fabricShape.Leaves + fabricShape.Spines
	for lid := 1; lid <= switches; lid++ {
		cmd := exec.Command("ibroute", strconv.Itoa(lid))
		cmd.Env = s.Env
		cmd.Dir = s.Dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ibroute %d: %v", lid, err)
		}
		text := string(out)
		i := strings.Index(text, " guid 0x")
		if i < 0 {
			t.Fatalf("ibroute %d printed no header:\n%s", lid, text)
		}
		guid := text[i+6 : i+6+18]
		want := map[int]int{}
		for _, l := range strings.Split(text, "\n") {
			f := strings.Fields(l)
			if len(f) > 3 && strings.HasPrefix(f[0], "0x") && strings.Contains(l, "(Channel Adapter portguid") {
				p, _ := strconv.Atoi(f[1])
				want[p]++
			}
		}
		for port := 1; port <= 8; port++ {
			got, ok := sample(body, portSeries("rdma_fabric_port_routes", guid, port))
			if !ok || int(got) != want[port] {
				t.Errorf("switch %s (LID %d) port %d: rdma_fabric_port_routes %v (present %v), ibroute %d", guid, lid, port, got, ok, want[port])
			}
		}
	}
	if t.Failed() {
		t.Log(smGrep(body, "rdma_fabric_port_routes"))
	}
}
