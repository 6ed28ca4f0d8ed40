// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
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
