// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package testenv

import "testing"

func TestCheckHelp(t *testing.T) {
	for help, ok := range map[string]bool{
		"Link rate of the port in bytes per second.":                                           true,
		"Port state (1 ACTIVE); set --collector.portwatch.interval to sample between scrapes.": true,
		"PortXmitWait ticks of the port (PMA counter).":                                        true,
		"":                                   false,
		"rdma_doctor: duration of a scrape.": false,
		"Files kept open, at most hostfs.MaxKept.": false,
		"Age of the host.Snapshot served.":         false,
		"Read by internal/host.":                   false,
		"Whether it worked. It did not.":           false,
		string(make([]rune, MaxHelp+1)):            false,
	} {
		if err := CheckHelp(help); (err == nil) != ok {
			t.Errorf("%q: %v, want ok %v", help, err, ok)
		}
	}
}
