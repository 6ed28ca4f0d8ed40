// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

func init() {
	register(&Check{
		ID:    "ipoib.mode",
		Title: "IPoIB mode",
		Reads: []Source{SourceNetdev},
		Doc: "The IPoIB mode (/sys/class/net/<ib>/mode) follows diagnose.policies.ipoib_mode. Enhanced IPoIB (ConnectX-4 and later, " +
			"the default on RHEL 8+ and MLNX_OFED) has no connected mode: datagram passes there whatever the policy.",
		Remedy:  "echo connected > /sys/class/net/<ib>/mode (legacy IPoIB only) and persist it in the NetworkManager profile (action ipoib-mode).",
		Pending: "no collector reads IPoIB netdevs yet (internal/netdev)",
	})
	register(&Check{
		ID:    "ipoib.mtu",
		Title: "IPoIB MTU matches the mode",
		Reads: []Source{SourceNetdev},
		Doc: "Connected mode: MTU 65520. Datagram mode: the IB MTU minus 4 (4092 on a 4K fabric, 2044 on 2K). Enhanced IPoIB " +
			"in datagram mode with MTU 4092 passes.",
		Remedy:  "ip link set <ib> mtu <value> and persist it (action ipoib-mode).",
		Pending: "no collector reads IPoIB netdevs yet (internal/netdev)",
	})
	register(&Check{
		ID:    "ipoib.ipv6",
		Title: "IPv6 on IPoIB per site policy",
		Reads: []Source{SourceNetdev},
		Doc: "IPv6 on IPoIB netdevs (disable_ipv6) follows diagnose.policies.ipoib_ipv6; by default it is only reported: " +
			"no upstream requirement either way was found.",
		Remedy:  "sysctl -w net.ipv6.conf.<ib>.disable_ipv6=1 (or 0) and persist it (action ipoib-ipv6).",
		Pending: "no collector reads IPoIB netdevs yet (internal/netdev)",
	})
	register(&Check{
		ID:    "roce.gid_v2",
		Title: "RoCE v2 GIDs present",
		Reads: []Source{SourceInfiniband, SourceNetdev},
		Doc: "Every RoCE port has at least one GID of type \"RoCE v2\" (ports/N/gid_attrs/types). Without one, RoCE v2 " +
			"(routable RoCE, what NCCL and most fabrics use) cannot work.",
		Remedy:  "Give the netdev an IP address (RoCE v2 GIDs follow the addresses), check the rdma_cm default mode and the kernel/OFED version.",
		Pending: "no collector reads RoCE GID types yet (internal/netdev)",
	})
}
