// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"fmt"

	"github.com/alecthomas/kingpin/v2"
)

// Spec is one collector: its name (the --collector.NAME flag), whether it
// runs by default, what it reads, its own flags and how to build it. Each
// collector's file declares its Spec, as node_exporter's collectors
// declare their flags beside their code, but without init(): Table lists
// them and AddFlags asks each for its flags.
type Spec struct {
	Name    string
	Default bool
	Help    string
	// Flags declares the collector's flags, all named
	// collector.NAME.*, into its part of f; nil for none.
	Flags func(app *kingpin.Application, f *Flags)
	New   func(env Env, f *Flags) (Collector, error)
}

// Table lists every collector, in the order --help shows their flags.
var Table = []Spec{
	infinibandSpec(),
	pciSpec(),
	irqSpec(),
	tuningSpec(),
	netdevSpec(),
	smSpec(),
	portwatchSpec(),
	kmsgSpec(),
	gpuSpec(),
	hwmonSpec(),
	rdmaNetlinkSpec(),
	devlinkSpec(),
	roceSpec(),
	jobsSpec(),
	fabricSpec(),
}

func lookup(name string) (Spec, bool) {
	for _, s := range Table {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}

// Flags are the collector flags, declared once by AddFlags, each
// collector's in its own typed options, and read by main, the collectors
// and the host options: nothing looks a flag up by name.
type Flags struct {
	enabled map[string]*bool
	// explicit records which --[no-]collector.NAME flags were given, and
	// disableDefaults --collector.disable-defaults: then only those given
	// as --collector.NAME run, as in node_exporter.
	explicit        map[string]*bool
	disableDefaults bool

	Infiniband  InfinibandOptions
	IRQ         IRQOptions
	Tuning      TuningOptions
	Netdev      NetdevOptions
	SM          SMOptions
	Portwatch   PortwatchOptions
	Kmsg        KmsgOptions
	RDMANetlink RDMANetlinkOptions
	Jobs        JobsOptions
	Fabric      FabricOptions
}

// AddFlags declares every collector flag on app: --collector.NAME for
// each collector, then each collector's own flags.
func AddFlags(app *kingpin.Application) *Flags {
	f := &Flags{enabled: map[string]*bool{}, explicit: map[string]*bool{}}
	app.Flag("collector.disable-defaults",
		"Run only the collectors enabled with --collector.NAME; the defaults are off.").BoolVar(&f.disableDefaults)
	for _, s := range Table {
		state := map[bool]string{true: "enabled", false: "disabled"}[s.Default]
		given := new(bool)
		f.explicit[s.Name] = given
		f.enabled[s.Name] = app.Flag("collector."+s.Name,
			fmt.Sprintf("Enable the %s collector: %s (default: %s).", s.Name, s.Help, state)).
			Default(fmt.Sprint(s.Default)).IsSetByUser(given).Bool()
	}
	for _, s := range Table {
		if s.Flags != nil {
			s.Flags(app, f)
		}
	}
	return f
}

// DefaultFlags are the flags' defaults, as AddFlags declares them (tests,
// benchmarks).
func DefaultFlags() *Flags {
	app := kingpin.New("defaults", "")
	f := AddFlags(app)
	if _, err := app.Parse(nil); err != nil {
		panic("collector flag defaults do not parse: " + err.Error()) // a bug in AddFlags
	}
	return f
}

// Enabled reports whether a collector runs.
func (f *Flags) Enabled(name string) bool {
	e, ok := f.enabled[name]
	if f.disableDefaults && (f.explicit[name] == nil || !*f.explicit[name]) {
		return false
	}
	return ok && *e
}

// SetEnabled turns a collector on or off (tests).
func (f *Flags) SetEnabled(name string, on bool) {
	v, given := on, true
	f.enabled[name] = &v
	f.explicit[name] = &given
}
