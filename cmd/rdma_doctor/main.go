// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Command rdma_doctor is a Prometheus exporter and diagnostics tool for
// InfiniBand and RoCE hosts.
//
// main.go holds the flags every command shares, the list of commands and
// the host options every command reads through. Each subcommand's file
// declares its flags and wires them to its package, which holds what the
// command does, prints and exits with (report.Command, probe.Command,
// remediate.Command); serve.go builds the HTTP server in one function.
// There are no init() hooks: run declares everything in the order --help
// shows.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"

	"github.com/rdma-doctor/rdma_doctor/collector"
	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/report"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/devlink"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
	"github.com/rdma-doctor/rdma_doctor/internal/read/podres"
	"github.com/rdma-doctor/rdma_doctor/internal/read/rdmanl"
	"github.com/rdma-doctor/rdma_doctor/internal/read/subprocess"
	"github.com/rdma-doctor/rdma_doctor/internal/read/tuning"
	"github.com/rdma-doctor/rdma_doctor/probe"
	"github.com/rdma-doctor/rdma_doctor/remediate"
)

const name = "rdma_doctor"

// App is what every command gets once flags are parsed: where the host is
// and how to read it, what the operator expects of it, and a logger.
type App struct {
	Paths hostfs.Paths
	// Host reads the host below Paths; every command reads through it.
	Host       *host.Host
	Config     *config.Config
	Collectors *collector.Flags
	Logger     *slog.Logger
	// Reaper starts the programs a long-running command runs (serve sets
	// it); nil elsewhere.
	Reaper *subprocess.Reaper
	// Kingpin is the application, for commands that report usage errors.
	Kingpin *kingpin.Application
}

// command is a subcommand: setup declares its flags on cmd and returns the
// function that runs it, which returns the process exit code.
type command struct {
	name, help string
	isDefault  bool
	// startupExit is the exit code when the command cannot start: a bad
	// flag, config file or path (diagnose: 3, "could not run", so a health
	// checker tells it from a failing host).
	startupExit int
	// background: the command reads the host's background sources
	// (sminfo; the fabric scan and sweep where a loop runs them). The
	// others never run them, whatever the collector flags say.
	background bool
	setup      func(cmd *kingpin.CmdClause) func(ctx context.Context, a *App) int
}

// commands are the subcommands, in --help order.
var commands = []command{
	{name: "serve", help: "Serve /metrics over HTTP (the default command).", isDefault: true, startupExit: 1, background: true, setup: setupServe},
	{name: "diagnose", help: "Evaluate the troubleshooting checklist once and print the findings. " +
		"Exit code: 0 all pass, 1 warn, 2 fail, 3 could not run.", startupExit: report.ExitCannotRun, background: true, setup: setupDiagnose},
	{name: "probe", help: "Run the verbs probe (perftest) once, or compare RDMA, IPoIB and Ethernet to a peer (--compare).", startupExit: probe.ExitUsage, setup: setupProbe},
	{name: "remediate", help: "Plan (default), apply or roll back the fixes for what diagnose finds. " +
		"Nothing changes without 'apply'; every change is journaled and 'rollback' restores it.", startupExit: remediate.ExitUsage, setup: setupRemediate},
}

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	app := kingpin.CommandLine
	app.Name = name
	app.Help = "Prometheus exporter and doctor for InfiniBand and RoCE hosts.\n\n" +
		"Without a command it serves metrics read from /sys/class/infiniband on --web.listen-address (default :9873)."
	app.Version(version.Print(name))
	app.UsageWriter(os.Stdout)
	app.HelpFlag.Short('h')
	useHelpTemplate(app)

	var paths hostfs.Paths
	configFile := app.Flag("config.file", "YAML file with expectations (link rates) and thresholds (default: <path.rootfs>/etc/rdma_doctor/rdma_doctor.yml if it exists). Optional: every default works without it.").PlaceHolder("FILE").String()
	configCheck := app.Flag("config.check", "Check --config.file and the flags, say whether they are valid, and exit (0 valid, 1 not).").Bool()
	app.Flag("path.rootfs", "Root of the host file system: sys, proc, etc are read below it.").Default("/").StringVar(&paths.Rootfs)
	app.Flag("path.sysfs", "sysfs mount point (default: <path.rootfs>/sys).").PlaceHolder("DIR").StringVar(&paths.Sysfs)
	app.Flag("path.procfs", "procfs mount point (default: <path.rootfs>/proc).").PlaceHolder("DIR").StringVar(&paths.Procfs)
	liveMode := app.Flag("host.live", "Whether the tree read is the running kernel's, so netlink, devlink and ethtool may be asked about it (rdma_netlink, devlink, RoCE PFC/trust/pause): auto decides from what the sysfs tree is (a sysfs mount in the process's network namespace), not from its path; true or false overrides.").
		Default(string(host.LiveAuto)).Enum(host.LiveModes...)
	// node_exporter's flag and default: one P keeps an idle server's
	// periodic work (the diagnose sample) from waking a thread per core,
	// and blocking reads still run in parallel on their own threads.
	maxProcs := app.Flag("runtime.gomaxprocs", "The target number of CPUs the Go runtime runs on (GOMAXPROCS).").
		Envar("GOMAXPROCS").Default("1").Int()
	promslogConfig := &promslog.Config{}
	promslogflag.AddFlags(app, promslogConfig)
	collectors := collector.AddFlags(app)

	// Every start-up error is one line, "rdma_doctor: error: ...", before
	// anything starts, with the exit code of the command it stopped.
	startupExit := 1
	fatal := func(err error) int {
		errorf(os.Stderr, "%v", err)
		return startupExit
	}
	runners := map[string]func(context.Context, *App) int{}
	background := map[string]bool{}
	for _, c := range commands {
		background[c.name] = c.background
		cmd := app.Command(c.name, c.help)
		if c.isDefault {
			cmd = cmd.Default()
		}
		cmd.PreAction(func(*kingpin.ParseContext) error {
			startupExit = c.startupExit
			return nil
		})
		runners[c.name] = c.setup(cmd)
	}

	selected, err := app.Parse(args)
	if err != nil {
		return fatal(fmt.Errorf("%v, try --help", err))
	}
	logger := promslog.New(promslogConfig)
	if *maxProcs < 1 {
		return fatal(fmt.Errorf("--runtime.gomaxprocs=%d: must be at least 1", *maxProcs))
	}
	runtime.GOMAXPROCS(*maxProcs)

	resolved, err := paths.Resolve()
	if err != nil {
		return fatal(err)
	}
	if *configFile == "" {
		*configFile = config.DefaultFile(resolved.Rootfs)
	}
	cfg, err := config.Load(*configFile)
	if err != nil {
		return fatal(err)
	}
	opts, err := hostOptions(resolved, host.LiveMode(*liveMode), cfg, collectors)
	if err != nil {
		return fatal(err)
	}
	if !background[selected] {
		// probe and remediate read no SM and no fabric: no sminfo
		// round of their own.
		opts.SM, opts.Fabric = nil, nil
	}
	if *configCheck {
		// The server starts without an unreadable topology file
		// (fabric.topology is then unknown); the check fails on it.
		if p := cfg.Diagnose.FabricTopology; p != "" {
			if _, err := diagnose.LoadTopology(p); err != nil {
				return fatal(fmt.Errorf("config diagnose.fabric_topology: %w", err))
			}
		}
		what := "the flags"
		if *configFile != "" {
			what = "config file " + *configFile + " and the flags"
		}
		fmt.Printf("%s: %s are valid\n", name, what)
		return 0
	}
	logger.Debug("live kernel", "on", opts.Live.On, "reason", opts.Live.Reason, "detail", opts.Live.Detail)
	if opts.Mapper != nil {
		logger.Debug("/sys is the live sysfs: RDMA device and character device mapping through rdmamap")
	}
	if *configFile != "" {
		logger.Debug("config file", "path", *configFile)
	}
	a := &App{Paths: resolved, Host: host.New(opts), Config: cfg, Collectors: collectors, Logger: logger, Kingpin: app}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runners[selected](ctx, a)
}

// hostOptions are the host options of the flags and the config file:
// which devices every source reads, the memlock processes, the opensm.conf
// override, the sminfo runs and the fabric scan and sweep (nil with their
// collector off), the ethtool query, whether the running kernel is asked about
// the tree (--host.live), and how long slow host state is reused (the
// diagnose interval, so the sampler finds it fresh).
func hostOptions(paths hostfs.Paths, live host.LiveMode, cfg *config.Config, f *collector.Flags) (host.Options, error) {
	devices, err := f.Infiniband.Devices()
	if err != nil {
		return host.Options{}, err
	}
	et, err := f.Netdev.EthtoolQuery()
	if err != nil {
		return host.Options{}, err
	}
	opts := host.Options{
		Paths:        paths,
		Devices:      devices,
		Tuning:       tuningOptions(cfg),
		Jobs:         f.Jobs.Options,
		PodResources: podResources(paths, f),
		OpenSMConfig: f.SM.OpenSMConfig,
		SM:           f.HostSM(),
		Ethtool:      et,
		SlowRefresh:  cfg.Diagnose.SampleInterval(),
		Live:         host.DetectLive(live, paths.Sysfs),
	}
	if opts.Live.On {
		// rdmamap reads /sys by fixed paths: usable only where the
		// process's own /sys is the live sysfs too (in the image it is
		// the runtime's mount, and the host's is at /host/sys).
		if paths.Sysfs == "/sys" || host.DetectLive(host.LiveAuto, "/sys").On {
			opts.Mapper = netdev.LiveMapper{}
		}
		// Netlink answers for the running kernel: asked only when the
		// tree read is its sysfs, as the ethtool query is.
		opts.Kernel = rdmanl.Live{}
		if f.Enabled("devlink") {
			// So is devlink; --no-collector.devlink asks it nothing.
			opts.Devlink = devlink.Live{}
		}
	}
	if opts.Fabric, err = f.HostFabric(); err != nil {
		return host.Options{}, err
	}
	if f.Enabled("rdma_netlink") {
		if opts.RDMANetlink, err = f.RDMANetlink.Query(); err != nil {
			return host.Options{}, err
		}
	}
	return opts, nil
}

// errorf prints a one-line error the way kingpin prints a usage error
// ("rdma_doctor: error: ..."), so every command's errors start alike.
func errorf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, name+": error: "+format+"\n", args...)
}

func tuningOptions(cfg *config.Config) tuning.Options {
	return tuning.Options{MemlockProcesses: cfg.Tuning.MemlockProcesses}
}

// podResources is the kubelet socket the jobs collector asks, empty
// without --collector.jobs.pods.
func podResources(paths hostfs.Paths, f *collector.Flags) string {
	if !f.Jobs.Pods {
		return ""
	}
	return filepath.Join(paths.Rootfs, podres.SocketPath)
}
