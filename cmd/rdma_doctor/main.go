// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Command rdma_doctor is a Prometheus exporter and diagnostics tool for
// InfiniBand and RoCE hosts.
//
// main.go holds the flags every command shares and the dispatch. Each
// subcommand lives in a file of its own and registers itself with
// addCommand; each part of the HTTP server beyond /metrics (a page, a
// background sampler, a metric family) registers with addServerHook.
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"

	"github.com/rdma-doctor/rdma_doctor/internal/config"
	"github.com/rdma-doctor/rdma_doctor/internal/hostfs"
)

const name = "rdma_doctor"

// App is what every command gets once flags are parsed: where the host is,
// what the operator expects of it, and a logger.
type App struct {
	Paths  hostfs.Paths
	Host   hostfs.Host
	Config *config.Config
	Logger *slog.Logger
	// Kingpin is the application, for commands that report usage errors.
	Kingpin *kingpin.Application
}

// command is a subcommand: setup declares its flags on cmd and returns the
// function that runs it, which returns the process exit code.
type command struct {
	name, help string
	isDefault  bool
	setup      func(cmd *kingpin.CmdClause) func(ctx context.Context, a *App) int
}

var commands []command

// addCommand registers a subcommand; called from init functions.
func addCommand(c command) { commands = append(commands, c) }

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	app := kingpin.CommandLine
	app.Name = name
	app.Help = "Prometheus exporter and doctor for InfiniBand and RoCE hosts.\n\n" +
		"Without a command it serves metrics read from /sys/class/infiniband on --web.listen-address (default :9873)."
	app.Version(version.Print(name))
	app.UsageWriter(os.Stdout)
	app.HelpFlag.Short('h')

	var paths hostfs.Paths
	configFile := app.Flag("config.file", "YAML file with expectations (link rates) and thresholds. Optional: every default works without it.").PlaceHolder("FILE").String()
	app.Flag("path.rootfs", "Root of the host file system: sys, proc, etc are read below it.").Default("/").StringVar(&paths.Rootfs)
	app.Flag("path.sysfs", "sysfs mount point (default: <path.rootfs>/sys).").PlaceHolder("DIR").StringVar(&paths.Sysfs)
	app.Flag("path.procfs", "procfs mount point (default: <path.rootfs>/proc).").PlaceHolder("DIR").StringVar(&paths.Procfs)
	promslogConfig := &promslog.Config{}
	promslogflag.AddFlags(app, promslogConfig)

	runners := map[string]func(context.Context, *App) int{}
	for _, c := range commands {
		cmd := app.Command(c.name, c.help)
		if c.isDefault {
			cmd = cmd.Default()
		}
		runners[c.name] = c.setup(cmd)
	}

	selected, err := app.Parse(args)
	if err != nil {
		app.Fatalf("%v, try --help", err)
	}
	logger := promslog.New(promslogConfig)

	resolved, err := paths.Resolve()
	if err != nil {
		app.Fatalf("%v", err)
	}
	cfg, err := config.Load(*configFile)
	if err != nil {
		app.Fatalf("%v", err)
	}
	a := &App{Paths: resolved, Host: resolved.Open(), Config: cfg, Logger: logger, Kingpin: app}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runners[selected](ctx, a)
}
