// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

// TestDisableDefaults: --collector.disable-defaults turns off the default
// collectors, and only those named with --collector.NAME run; without it
// the defaults and the --no- flags work as before.
func TestDisableDefaults(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want map[string]bool
	}{
		{nil, map[string]bool{"infiniband": true, "irq": true, "fabric": false}},
		{[]string{"--no-collector.irq"}, map[string]bool{"infiniband": true, "irq": false}},
		{[]string{"--collector.disable-defaults"}, map[string]bool{"infiniband": false, "irq": false, "sm": false, "fabric": false}},
		{[]string{"--collector.disable-defaults", "--collector.infiniband", "--collector.fabric"},
			map[string]bool{"infiniband": true, "irq": false, "pci": false, "fabric": true}},
		{[]string{"--collector.disable-defaults", "--no-collector.infiniband"}, map[string]bool{"infiniband": false}},
	} {
		app := kingpin.New("test", "")
		f := AddFlags(app)
		if _, err := app.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		for name, want := range tc.want {
			if got := f.Enabled(name); got != want {
				t.Errorf("%v: %s enabled %v, want %v", tc.args, name, got, want)
			}
		}
	}
}

// The module memory is read through the ethtool query: asking for it with
// the query off is a start-up error, not a silent nothing.
func TestModuleEEPROMNeedsEthtool(t *testing.T) {
	f := DefaultFlags()
	f.ModuleEEPROM = true
	if et, err := f.EthtoolQuery(); err != nil || et == nil || !et.ModuleEEPROM {
		t.Errorf("with the ethtool query on: %+v, %v", et, err)
	}
	f.Ethtool = false
	if _, err := f.EthtoolQuery(); err == nil || !strings.Contains(err.Error(), "--collector.netdev.ethtool") {
		t.Errorf("with the ethtool query off: %v, want an error naming --collector.netdev.ethtool", err)
	}
	f.ModuleEEPROM = false
	if et, err := f.EthtoolQuery(); err != nil || et != nil {
		t.Errorf("both off: %+v, %v", et, err)
	}
}
