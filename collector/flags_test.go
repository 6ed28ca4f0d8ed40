// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"os"
	"path/filepath"
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
	f.Netdev.ModuleEEPROM = true
	if et, err := f.Netdev.EthtoolQuery(); err != nil || et == nil || !et.ModuleEEPROM {
		t.Errorf("with the ethtool query on: %+v, %v", et, err)
	}
	f.Netdev.Ethtool = false
	if _, err := f.Netdev.EthtoolQuery(); err == nil || !strings.Contains(err.Error(), "--collector.netdev.ethtool") {
		t.Errorf("with the ethtool query off: %v, want an error naming --collector.netdev.ethtool", err)
	}
	f.Netdev.ModuleEEPROM = false
	if et, err := f.Netdev.EthtoolQuery(); err != nil || et != nil {
		t.Errorf("both off: %+v, %v", et, err)
	}
}

// TestNodeNameMapFlag: the map is read when the flags are resolved (so
// --config.check and start-up fail on it), its error names the flag, the
// file and the line, and a good map reaches the host's fabric options.
func TestNodeNameMapFlag(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	if err := os.WriteFile(good, []byte("0x200001 \"leaf-1\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("# map\n0x200001 leaf-1\nleaf2 \"x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	flags := func(m string) *Flags {
		app := kingpin.New("test", "")
		f := AddFlags(app)
		if _, err := app.Parse([]string{"--collector.fabric", "--collector.fabric.node-name-map=" + m}); err != nil {
			t.Fatal(err)
		}
		return f
	}
	o, err := flags(good).HostFabric()
	if err != nil || o.Names[0x200001] != "leaf-1" {
		t.Fatalf("good map: %v, %+v", err, o)
	}
	_, err = flags(bad).HostFabric()
	want := "--collector.fabric.node-name-map: node name map " + bad + `: line 3: "leaf2" is not a GUID`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("bad map: %v, want %q", err, want)
	}
}
