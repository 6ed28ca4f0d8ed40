// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/rdma-doctor/rdma_doctor/internal/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/host"
	"github.com/rdma-doctor/rdma_doctor/internal/jobs"
	"github.com/rdma-doctor/rdma_doctor/internal/netdev"
	"github.com/rdma-doctor/rdma_doctor/internal/rdmanl"
	"github.com/rdma-doctor/rdma_doctor/internal/tuning"
)

// Spec is one collector: its name (the --collector.NAME flag), whether it
// runs by default, what it reads, and how to build it.
type Spec struct {
	Name    string
	Default bool
	Help    string
	New     func(env Env, f *Flags) (Collector, error)
}

// Table lists every collector, in the order --help shows their flags.
var Table = []Spec{
	{"infiniband", true, "devices, ports, link rate and width, PMA counters and hw_counters from /sys/class/infiniband",
		func(env Env, _ *Flags) (Collector, error) { return NewInfinibandCollector(env), nil }},
	{"pci", true, "NUMA node, local CPUs and PCIe link of each RDMA device's PCI function",
		func(env Env, _ *Flags) (Collector, error) { return NewPCICollector(env), nil }},
	{"irq", true, "completion IRQs of each RDMA device, where they may and do run against the device's NUMA-local CPUs, and whether irqbalance runs",
		func(env Env, f *Flags) (Collector, error) { return NewIRQCollector(env, f.IRQPerIRQ), nil }},
	{"tuning", true, "host tuning from /proc and /sys: hugepages, sysctls, CPU governors, transparent hugepages, kernel, SELinux, RDMA modules, memlock limits, rdma cgroup limits",
		func(env Env, f *Flags) (Collector, error) {
			c := NewTuningCollector(env, f.Modules())
			c.(*tuningCollector).cgroups = f.CgroupLimits
			return c, nil
		}},
	{"netdev", true, "IPoIB and RoCE netdevs of RDMA ports from /sys/class/net (mode, MTU, state, pkey children, GID types), RDMA character devices, and ethtool driver information and statistics",
		func(env Env, _ *Flags) (Collector, error) { return NewNetdevCollector(env), nil }},
	{"sm", true, "subnet manager: sminfo answers (background, needs umad access) and the local OpenSM process and configuration",
		func(Env, *Flags) (Collector, error) { return NewSMCollector(), nil }},
	{"portwatch", true, "port states read by the server at each scrape, at each link notification of the live kernel and from link_downed (every --collector.portwatch.interval too when set): transitions, time down, flaps between two scrapes",
		func(env Env, _ *Flags) (Collector, error) { return NewPortwatchCollector(env), nil }},
	{"kmsg", true, "kernel log events of the RDMA drivers (firmware health, command timeouts, power, temperature, modules, transmit timeouts, link downs, PCIe errors) read from /dev/kmsg below --path.rootfs by the server; needs CAP_SYSLOG where kernel.dmesg_restrict=1",
		func(env Env, _ *Flags) (Collector, error) { return NewKmsgCollector(env), nil }},
	{"gpu", true, "GPUs of the PCI bus, their PCI relation to every RDMA device (nvidia-smi topo -m) and GPUDirect RDMA readiness; nothing on a host without GPUs",
		func(env Env, _ *Flags) (Collector, error) { return NewGPUCollector(env), nil }},
	{"hwmon", true, "temperature sensors of each RDMA device's adapter from the kernel's hwmon class (mlx5 ASIC and module, Linux 6.6+), read on the slow interval: each read is a firmware command",
		func(env Env, _ *Flags) (Collector, error) { return NewHwmonCollector(env), nil }},
	{"rdma_netlink", true, "RDMA netlink (live /sys only; no privileges): optional hardware counters and whether each is enabled, resource totals per device (one request per port and two dumps per scrape; excluded devices are never asked); opt-in per-process totals and QP counters (docs/rdma-netlink.md)",
		func(env Env, _ *Flags) (Collector, error) { return NewRDMANetlinkCollector(env), nil }},
	{"devlink", true, "devlink health reporters of each RDMA device's PCI function (mlx5 fw, fw_fatal, tx, rx, vnic: state, errors, recoveries) and its firmware versions running and stored (burned, not activated); live /sys only, no privileges; one reporter dump per scrape, one INFO_GET per device on the slow interval",
		func(env Env, _ *Flags) (Collector, error) { return NewDevlinkCollector(env), nil }},
	{"roce", true, "RoCE lossless configuration per RoCE netdev: ECN per priority, CNP priority and default RoCE ToS from sysfs and configfs; PFC, ETS, trust mode and global pause from DCB netlink and ethtool (live /sys only; no privileges)",
		func(env Env, _ *Flags) (Collector, error) { return NewRoCECollector(env), nil }},
	{"jobs", false, "which Slurm job holds which RDMA device, from the cgroup tree: the job cgroup's rdma.current, else its processes' open /dev/infiniband/uverbs* (needs to read other users' /proc/PID/fd: CAP_SYS_PTRACE, or root); one series per job per device",
		func(env Env, _ *Flags) (Collector, error) { return NewJobsCollector(env), nil }},
	{"fabric", false, "every link of the InfiniBand fabric from iblinkinfo (background; for the SM host or any host with umad access)",
		func(env Env, f *Flags) (Collector, error) {
			opts, err := f.Fabric.validated()
			if err != nil {
				return nil, err
			}
			return NewFabricCollector(env, opts), nil
		}},
}

func lookup(name string) (Spec, bool) {
	for _, s := range Table {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}

// Flags are the collector flags, declared once by AddFlags and read by
// main, the collectors and the host options: nothing looks a flag up by
// name.
type Flags struct {
	enabled map[string]*bool
	// explicit records which --[no-]collector.NAME flags were given, and
	// disableDefaults --collector.disable-defaults: then only those given
	// as --collector.NAME run, as in node_exporter.
	explicit        map[string]*bool
	disableDefaults bool

	// DeviceInclude and DeviceExclude select the RDMA devices every
	// source reads (host.DeviceFilter).
	DeviceInclude, DeviceExclude string
	// IRQPerIRQ adds one series per RDMA IRQ.
	IRQPerIRQ bool
	// TuningModules are the modules rdma_host_module_loaded reports
	// (comma-separated).
	TuningModules string
	// CgroupLimits exports rdma_host_cgroup_rdma_limit: one series per
	// cgroup, which on a Slurm or Kubernetes node means per job or pod.
	CgroupLimits bool
	// Jobs bounds the jobs collector's read (host.Options.Jobs).
	Jobs jobs.Options
	// JobsPods asks the kubelet's pod-resources API which pods hold which
	// device (host.Options.PodResources).
	JobsPods bool
	// Ethtool queries each RDMA netdev with the ethtool ioctl; EthtoolStats
	// selects the statistics exported.
	Ethtool      bool
	EthtoolStats string
	// ModuleEEPROM reads each RoCE netdev's transceiver memory (needs
	// Ethtool and CAP_NET_ADMIN).
	ModuleEEPROM bool
	// SM is the sminfo runs (host.Options.SM where the sm collector runs).
	SM host.SMOptions
	// OpenSMConfig is the opensm.conf to read instead of the search
	// (host.Options.OpenSMConfig).
	OpenSMConfig string
	Fabric       FabricOptions
	RDMANetlink  RDMANetlinkOptions
	// PortWatchInterval is the port state sampler's period, 0 for none
	// (rounds on demand only).
	PortWatchInterval time.Duration
	// KmsgInterval is how often the kernel log reader drains a regular
	// file or FIFO in place of /dev/kmsg (the kernel's log is waited on).
	KmsgInterval time.Duration
}

// RDMANetlinkOptions are the rdma_netlink collector's opt-in reads.
type RDMANetlinkOptions struct {
	// ProcessResources dumps every qp, cq, mr, pd and ctx object and
	// counts them by process name, at most MaxProcesses a device, at most
	// MaxObjects objects a scrape.
	ProcessResources bool
	MaxProcesses     int
	MaxObjects       int
	// QPCounters reads each port's QP counter mode and bound counters.
	QPCounters bool
}

// FabricOptions are the fabric flags: the scan and sweep the host runs
// (host.Options.Fabric, its Shard and Shards parsed from ShardSpec), and
// how the fabric collector renders them.
type FabricOptions struct {
	host.FabricOptions
	DegradedOnly bool
	// ShardSpec is "I/N", parsed into Shard and Shards.
	ShardSpec string
	// PortSeries trims the per-port series (PortSeries*).
	PortSeries string
	// NodeNameMap is the node name map file, read into
	// host.FabricOptions.Names by HostFabric.
	NodeNameMap string
}

// The values of --collector.fabric.port-series.
const (
	// PortSeriesAll: every counter of every swept port.
	PortSeriesAll = "all"
	// PortSeriesErrors: error counters and XmitWait (no data and packet
	// counters) of every swept port.
	PortSeriesErrors = "errors"
	// PortSeriesErroringPorts: counters only for ports with a non-zero
	// error counter or a saturated field; the others keep their state and
	// unknown series.
	PortSeriesErroringPorts = "erroring-ports"
)

// validated checks and completes the fabric options.
func (o FabricOptions) validated() (FabricOptions, error) {
	i, n, err := ParseShard(o.ShardSpec)
	if err != nil {
		return o, err
	}
	o.Shard, o.Shards = i, n
	switch o.PortSeries {
	case PortSeriesAll, PortSeriesErrors, PortSeriesErroringPorts:
	default:
		return o, fmt.Errorf("--collector.fabric.port-series must be %s, %s or %s, not %q", PortSeriesAll, PortSeriesErrors, PortSeriesErroringPorts, o.PortSeries)
	}
	return o, nil
}

// ParseShard parses --collector.fabric.shard's "I/N" (0 <= I < N).
func ParseShard(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("--collector.fabric.shard %q: want I/N with 0 <= I < N (e.g. 0/2 and 1/2 for two exporters)", s)
	}
	return i, n, nil
}

// AddFlags declares every collector flag on app.
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
	app.Flag("collector.infiniband.device-include",
		"Regexp of RDMA devices to read (default: all). Mutually exclusive with device-exclude.").PlaceHolder("REGEXP").StringVar(&f.DeviceInclude)
	app.Flag("collector.infiniband.device-exclude",
		"Regexp of RDMA devices never to read (restricted ConnectX-7 functions flood the kernel log when read). Mutually exclusive with device-include.").PlaceHolder("REGEXP").StringVar(&f.DeviceExclude)
	app.Flag("collector.irq.per-irq",
		"Also export one series per RDMA IRQ (rdma_device_irq_info, rdma_device_irq_interrupts_total, rdma_device_irq_off_node): tens to hundreds per device.").BoolVar(&f.IRQPerIRQ)
	app.Flag("collector.tuning.modules",
		"Comma-separated kernel modules reported by rdma_host_module_loaded (1 loaded, 0 not).").
		Default(strings.Join(tuning.DefaultModules, ",")).StringVar(&f.TuningModules)
	app.Flag("collector.tuning.cgroup-limits",
		"Export rdma_host_cgroup_rdma_limit, one series per cgroup with a finite rdma.max: per job step or pod on a Slurm or Kubernetes node, so off by default (diagnose's cgroup.rdma judges them either way).").
		BoolVar(&f.CgroupLimits)
	app.Flag("collector.jobs.max-jobs",
		"Jobs read on one host; those past it are counted in rdma_jobs_unknown and have no rdma_job_device_info series.").
		Default(strconv.Itoa(jobs.DefaultOptions.MaxJobs)).IntVar(&f.Jobs.MaxJobs)
	app.Flag("collector.jobs.pods",
		"Also ask the kubelet which Kubernetes pods hold which RDMA device (its pod-resources API, /var/lib/kubelet/pod-resources/kubelet.sock below --path.rootfs; needs read-write access to the socket): rdma_pod_device_info, one series per pod per device, at most max-jobs pods.").
		BoolVar(&f.JobsPods)
	app.Flag("collector.netdev.ethtool",
		"Query each RDMA netdev with the ethtool ioctl (driver, firmware, speed, statistics). Only netdevs the running kernel has under the same name and ifindex as the sysfs tree are queried.").
		Default("true").BoolVar(&f.Ethtool)
	app.Flag("collector.netdev.ethtool-stats",
		"Anchored regexp of the ethtool statistics exported as rdma_netdev_ethtool_stat_total (default: mlx5 physical-layer errors, discards, pause and FEC counters). Empty exports none.").
		Default(netdev.DefaultStats).StringVar(&f.EthtoolStats)
	app.Flag("collector.netdev.module-eeprom",
		"Read each RoCE netdev's transceiver memory (ethtool netlink MODULE_EEPROM_GET, Linux 5.13+; SFF-8472, SFF-8636, CMIS) for rdma_netdev_module_*: temperature, voltage, per-lane Rx power, Tx bias and Tx power. Off by default: each page is a firmware access, and the kernel allows it only with CAP_NET_ADMIN. Read on the slow interval, only for netdevs of RDMA ports the device filter keeps, and only with --collector.netdev.ethtool.").
		BoolVar(&f.ModuleEEPROM)
	app.Flag("collector.rdma_netlink.process-resources",
		"Also export rdma_resource_process_objects: each device's qp, cq, mr, pd and ctx objects by owning process name (/proc/PID/comm; kernel owners as [module]), never by PID. Five dumps per device per scrape; on mlx5 each QP dumped costs the kernel one firmware command.").
		BoolVar(&f.RDMANetlink.ProcessResources)
	app.Flag("collector.rdma_netlink.max-processes",
		"Process names per device in rdma_resource_process_objects (those with the most objects); the rest are summed as process=\"other\" and rdma_resource_process_capped says so.").
		Default(strconv.Itoa(rdmanl.DefaultMaxProcesses)).IntVar(&f.RDMANetlink.MaxProcesses)
	app.Flag("collector.rdma_netlink.max-objects",
		"Objects (resource objects and QP counters) read per scrape; reaching it abandons the dump under way and skips the rest, and rdma_resource_dump_truncated says which.").
		Default(strconv.Itoa(rdmanl.DefaultMaxObjects)).IntVar(&f.RDMANetlink.MaxObjects)
	app.Flag("collector.rdma_netlink.qp-counters",
		"Also export each port's QP counter mode (rdma statistic qp mode) and its bound QP counters; their values only per QP type, in auto mode by type alone (never per process). Two requests per port per scrape.").
		BoolVar(&f.RDMANetlink.QPCounters)
	app.Flag("collector.sm.sminfo-path",
		"sminfo executable (infiniband-diags), run without a shell in the background on each ACTIVE InfiniBand port that has a umad device (/sys/class/infiniband_mad/umadN and /dev/infiniband/umadN below --path.rootfs).").
		Default("sminfo").StringVar(&f.SM.SminfoPath)
	app.Flag("collector.sm.sminfo-interval", "Interval between sminfo runs.").Default("1m").DurationVar(&f.SM.Interval)
	app.Flag("collector.sm.sminfo-timeout", "Timeout of one sminfo run; its process group is killed after it.").Default("10s").DurationVar(&f.SM.Timeout)
	app.Flag("collector.sm.opensm-config",
		"opensm.conf to read (a host path, below --path.rootfs) instead of the file a running opensm names with -F or the distributions' locations.").
		PlaceHolder("PATH").StringVar(&f.OpenSMConfig)
	app.Flag("collector.portwatch.interval",
		"Interval of port state rounds nobody asked for (three reads per port: state, phys_state, link_downed); 0, the default, runs rounds at each scrape and link notification only, so an idle host costs no wake-ups (see docs/device-health.md for the flaps each way catches).").
		Default("0s").DurationVar(&f.PortWatchInterval)
	app.Flag("collector.kmsg.interval",
		"How often the kernel log reader drains a regular file or FIFO in place of /dev/kmsg (fixture trees); the kernel's own log is waited on through the runtime's poller, not polled.").
		Default("250ms").DurationVar(&f.KmsgInterval)
	app.Flag("collector.fabric.iblinkinfo-path",
		"iblinkinfo executable (infiniband-diags), run as 'iblinkinfo --line' without a shell in the background.").
		Default("iblinkinfo").StringVar(&f.Fabric.Path)
	app.Flag("collector.fabric.interval", "Interval between fabric scans (each sends MADs to every port of the fabric).").Default("5m").DurationVar(&f.Fabric.Interval)
	app.Flag("collector.fabric.timeout", "Timeout of one fabric scan; its process group is killed after it.").Default("2m").DurationVar(&f.Fabric.Timeout)
	app.Flag("collector.fabric.ca", "Local RDMA device iblinkinfo sends from (-C; default: iblinkinfo's choice).").PlaceHolder("DEVICE").StringVar(&f.Fabric.CA)
	app.Flag("collector.fabric.port", "Local port iblinkinfo sends from (-P; 0: iblinkinfo's choice).").Default("0").IntVar(&f.Fabric.Port)
	app.Flag("collector.fabric.degraded-only",
		"Export per-link series only for links that are degraded or not ACTIVE (the fabric-wide counts cover the rest); for very large fabrics.").BoolVar(&f.Fabric.DegradedOnly)
	app.Flag("collector.fabric.counters",
		"Sweep every switch port's PMA counters in the background with two ibqueryerrors runs against a fabric cache that ibnetdiscover writes when the fabric's nodes change (never resets counters).").
		Default("true").BoolVar(&f.Fabric.Counters)
	app.Flag("collector.fabric.ibqueryerrors-path", "ibqueryerrors executable (infiniband-diags), run without a shell.").
		Default("ibqueryerrors").StringVar(&f.Fabric.IBQueryErrorsPath)
	app.Flag("collector.fabric.ibnetdiscover-path", "ibnetdiscover executable (infiniband-diags), run without a shell to write the fabric cache the sweeps read against.").
		Default("ibnetdiscover").StringVar(&f.Fabric.IBNetDiscoverPath)
	app.Flag("collector.fabric.sminfo-path", "sminfo executable (infiniband-diags), run without a shell before and after each counter sweep: a sweep across a change of master SM (its LIDs may name other nodes) is unknown, and the fabric cache is discovered again.").
		Default("sminfo").StringVar(&f.Fabric.SMInfoPath)
	app.Flag("collector.fabric.cache-dir", "Writable directory for the fabric cache and threshold file of the counter sweep (default: a private directory under $TMPDIR).").
		PlaceHolder("DIR").StringVar(&f.Fabric.CacheDir)
	app.Flag("collector.fabric.counters-interval",
		"Interval between counter sweeps; a sweep still running when the next is due makes that one skipped (counted), never stacked.").
		Default("1m").DurationVar(&f.Fabric.CountersInterval)
	app.Flag("collector.fabric.counters-timeout", "Deadline of one counter sweep, its ibnetdiscover and ibqueryerrors runs together: a run still going then is killed with its process group, the sweep ends there and its ports are unknown.").
		Default("2m").DurationVar(&f.Fabric.CountersTimeout)
	app.Flag("collector.fabric.routes",
		"Read every swept switch's unicast forwarding table in the background with one dump_fts run (rdma_fabric_port_routes, the fabric.routing check), again when the scan's nodes, LIDs or port states change.").
		Default("true").BoolVar(&f.Fabric.Routes)
	app.Flag("collector.fabric.dump-fts-path", "dump_fts executable (infiniband-diags; what dump_lfts.sh runs), run without a shell.").
		Default("dump_fts").StringVar(&f.Fabric.DumpFTSPath)
	app.Flag("collector.fabric.routes-max-age", "Read the forwarding tables again at least this often even when the scan shows no change (the SM may reroute on its own).").
		Default("15m").DurationVar(&f.Fabric.RoutesMaxAge)
	app.Flag("collector.fabric.ca-counters",
		"Sweep channel-adapter ports too (hosts running rdma_doctor export their own side from sysfs).").BoolVar(&f.Fabric.CACounters)
	app.Flag("collector.fabric.shard",
		"I/N: sweep and export only the nodes whose GUID falls in shard I of N, so N exporters split the fabric and their union covers each switch exactly once.").
		Default("0/1").StringVar(&f.Fabric.ShardSpec)
	app.Flag("collector.fabric.port-series",
		"Per-port counter series: all; errors (no data and packet counters); erroring-ports (counters only for ports with errors). State and unknown series stay for every port.").
		Default(PortSeriesAll).EnumVar(&f.Fabric.PortSeries, PortSeriesAll, PortSeriesErrors, PortSeriesErroringPorts)
	app.Flag("collector.fabric.node-name-map",
		"infiniband-diags node name map (lines of 0xGUID \"name\", as ibnetdiscover, iblinkinfo and ibqueryerrors take it): its names replace the node descriptions in every fabric series' node labels and in the fabric findings. Read once at start-up: a changed file needs a restart.").
		PlaceHolder("FILE").StringVar(&f.Fabric.NodeNameMap)
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

// HostSM is the sminfo runs the flags ask of the host: nil, never run,
// with the sm collector off.
func (f *Flags) HostSM() *host.SMOptions {
	if !f.Enabled("sm") {
		return nil
	}
	o := f.SM
	return &o
}

// HostFabric is the fabric scan and sweep the flags ask of the host: nil,
// neither run, with the fabric collector off.
func (f *Flags) HostFabric() (*host.FabricOptions, error) {
	if !f.Enabled("fabric") {
		return nil, nil
	}
	o, err := f.Fabric.validated()
	if err != nil {
		return nil, err
	}
	if o.NodeNameMap != "" {
		if o.Names, err = fabric.LoadNameMap(o.NodeNameMap); err != nil {
			return nil, fmt.Errorf("--collector.fabric.node-name-map: %w", err)
		}
	}
	return &o.FabricOptions, nil
}

// Devices is the device filter the flags give.
func (f *Flags) Devices() (host.DeviceFilter, error) {
	return host.NewDeviceFilter(f.DeviceInclude, f.DeviceExclude)
}

// Modules are the module names of --collector.tuning.modules.
func (f *Flags) Modules() []string {
	var mods []string
	for _, m := range strings.Split(f.TuningModules, ",") {
		if m = strings.TrimSpace(m); m != "" {
			mods = append(mods, m)
		}
	}
	return mods
}

// RDMANetlinkQuery is the RDMA netlink query the flags ask for.
func (f *Flags) RDMANetlinkQuery() (rdmanl.Options, error) {
	o := f.RDMANetlink
	if o.MaxProcesses < 1 {
		return rdmanl.Options{}, fmt.Errorf("--collector.rdma_netlink.max-processes must be at least 1, not %d", o.MaxProcesses)
	}
	if o.MaxObjects < 1 {
		return rdmanl.Options{}, fmt.Errorf("--collector.rdma_netlink.max-objects must be at least 1, not %d", o.MaxObjects)
	}
	return rdmanl.Options{Stats: true, Status: true, Resources: true,
		ProcessResources: o.ProcessResources, MaxProcesses: o.MaxProcesses, MaxObjects: o.MaxObjects,
		QPCounters: o.QPCounters}, nil
}

// EthtoolQuery is the ethtool query the flags ask for; nil for none.
func (f *Flags) EthtoolQuery() (*netdev.Ethtool, error) {
	if !f.Ethtool {
		if f.ModuleEEPROM {
			// The module memory is read through the ethtool query: asked
			// for without it, it would silently be nothing.
			return nil, errors.New("--collector.netdev.module-eeprom needs --collector.netdev.ethtool (on by default; --no-collector.netdev.ethtool turns it off)")
		}
		return nil, nil
	}
	var stats *regexp.Regexp
	if f.EthtoolStats != "" {
		var err error
		if stats, err = host.CompileAnchored("--collector.netdev.ethtool-stats", f.EthtoolStats); err != nil {
			return nil, err
		}
	}
	return &netdev.Ethtool{Stats: stats, ModuleEEPROM: f.ModuleEEPROM}, nil
}
