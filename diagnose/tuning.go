// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

func init() {
	register(&Check{
		ID:    "cpu.governor",
		Title: "CPU frequency governor",
		Reads: []Source{SourceTuning},
		Doc: "Every CPU runs the governor diagnose.policies.cpu_governor asks for (default performance, as both mlnx_tune " +
			"profiles set); skips on hosts without cpufreq (VMs).",
		Remedy:  "cpupower frequency-set -g performance, or a tuned profile (action cpu-governor).",
		Pending: "no collector reads the CPU frequency governors yet (internal/tuning)",
	})
	register(&Check{
		ID:    "mem.hugepages",
		Title: "Hugepages reserved",
		Reads: []Source{SourceTuning},
		Doc: "With diagnose.policies.hugepages set, at least min_pages pages of page_size_kib exist over the NUMA nodes; " +
			"hugepages help DPDK/VMA and some MPI/UCX setups, they are not required for verbs.",
		Remedy:  "Reserve pages per NUMA node (/sys/devices/system/node/node<N>/hugepages/...; 1 GiB pages at boot: hugepagesz=1G hugepages=N) (action hugepages).",
		Pending: "no collector reads hugepages yet (internal/tuning)",
	})
	register(&Check{
		ID:    "mem.memlock",
		Title: "Locked-memory limit",
		Reads: []Source{SourceTuning},
		Doc: "RLIMIT_MEMLOCK of the job launchers (and this process) is unlimited, or at least diagnose.policies.memlock_min_kib: " +
			"verbs pin memory against it, and the 64 KiB default makes memory registration fail.",
		Remedy:  "A limits.d drop-in (* soft/hard memlock unlimited) and LimitMEMLOCK=infinity for systemd-started launchers (action memlock).",
		Pending: "no collector reads the memlock limits yet (internal/tuning)",
	})
	register(&Check{
		ID:    "sysctl.net",
		Title: "Socket buffer sysctls for IPoIB",
		Reads: []Source{SourceTuning, SourceNetdev},
		Doc: "On hosts with IPoIB netdevs, net.core.rmem_max and wmem_max are at least 4194304 and net.core.netdev_max_backlog " +
			"at least 250000 (mlnx-tools' values; diagnose.policies.sysctls). They tune sockets and IPoIB, not verbs or NCCL over IB.",
		Remedy:  "sysctl -w the values and persist them in /etc/sysctl.d/90-rdma-doctor.conf (action sysctl).",
		Pending: "no collector reads sysctls yet (internal/tuning)",
	})
	register(&Check{
		ID:    "drv.kernel",
		Title: "Kernel at or above the site floor (RoCE)",
		Reads: []Source{SourceTuning, SourceInfiniband},
		Doc: "On hosts with RoCE ports the running kernel is at least diagnose.policies.kernel_floor (default 5.4, the guide's number). " +
			"RoCE v2 itself exists since about 4.5, so this is a policy warning; roce.gid_v2 is the real test.",
		Remedy:  "Upgrade the kernel (or the OFED stack) in a maintenance window.",
		Pending: "no collector reads the kernel release yet (internal/tuning)",
	})
}
