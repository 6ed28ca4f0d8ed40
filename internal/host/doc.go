// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package host owns reading the host. Its Options say what to read and
// where, declared once and passed typed from main; a Host holds what
// outlives one collection (cached static device attributes, the slow host
// state and when it was read); a Snapshot is one collection's view, whose
// sources are read lazily and at most once. Collectors, diagnose checks
// and remediate actions all consume Snapshots, so a source is read once
// per collection however many of them need it, and the diagnose sampler
// reuses what the scrape already read.
//
// A Snapshot is one moment. A source's first call on it reads the source
// (live), takes the Host's cached value or reads it (slow), or takes the
// latest published result (background, the port sampler, the kernel log
// reader); every later call on that Snapshot returns the same value and
// error, however the Host's caches are refreshed or a loop publishes
// meanwhile (pinned, sources.go). Consumers that judge readings keep no
// copies of their own.
//
// Freshness, per source:
//
//   - live, read by every snapshot that asks: port state, phys_state,
//     rate, LIDs, PMA counters and hw_counters (Class), the netdevs
//     (Netdevs: operstate, carrier and ethtool statistics change between
//     scrapes);
//   - static, cached per device until the device is re-registered (its
//     sysfs directory changes) or StaticMaxAge passes: node type, GUIDs,
//     firmware, board and HCA type, link layer, the PCI parent, the port
//     and counter file lists;
//   - slow, refreshed at most every SlowRefresh and shared by every
//     snapshot and the sampler: the PCI functions (NUMA node, local CPUs,
//     PCIe link), IRQ placement (/proc/interrupts, affinities, irqbalance),
//     host tuning, the local OpenSM (process scan, configuration, log),
//     the CPU topology, the hostname, the GPUs with their relation to
//     the RDMA devices and the GPUDirect RDMA prerequisites, the devices'
//     temperature sensors (hwmon.go: each read a firmware command on
//     mlx5), the netdevs' identities and settings, and the devices'
//     devlink firmware versions. The PCI functions and IRQ placement
//     (Freshness SlowFollowingDevices) are read again at once when the
//     class's devices change (one appears, vanishes or is re-registered),
//     so their series follow the live class (see pciRead);
//   - background, run by a loop of its own on its own interval and
//     published (Freshness Published): sminfo through every ACTIVE
//     InfiniBand port (sm.go), the fabric's iblinkinfo scan and its
//     counter sweep (fabric.go). The options turn each on (Options.SM,
//     Options.Fabric, passed typed from main: nil with the collector
//     off); Host.Workers hands their loops to the server, and a snapshot
//     reads the latest result and never waits for a run. Where no loop
//     runs (the CLI's diagnose) a snapshot runs one sminfo round of its
//     own, and reads no fabric.
//
// Each slow source is one Source value, declared in the file of its
// topic through register, with its name (the source label of
// rdma_snapshot_age_seconds), its Freshness and its read; its Snapshot
// accessor is one line through the generic get. Each background source is
// one Background value, declared the same way with its name and how to
// open its runner from the options; its accessor is one line through the
// generic published. register lists the source as it is declared, so a
// source cannot be declared and left out; New makes one cache and one
// Snapshot pin slot per listed source, Ages reports them all (a
// background source's age is the time since it published its latest
// result), checkDevices invalidates by Freshness and Workers hands out
// the background loops. A source never registered (a literal) reads as an
// error value naming it, never a panic.
//
// Each source a consumer judges (the diagnose checks' Reads gate) also
// has a Need beside its accessor: the name a report lists it by and why
// a reading of it cannot be used (off, not the live kernel, not watched,
// unreadable), so no consumer mirrors a source's failure modes.
//
// # Caches and pools
//
// Everything a scrape keeps from one read to the next, in the order a
// scrape meets it, with what makes it read or build again. A new one
// belongs in this list, or is not added.
//
//  1. Collection singleflight (collector.Aggregator.Metrics): scrapes that
//     arrive while a collection runs share its metrics. Kept only while
//     that collection runs; the next scrape collects anew.
//  2. slow[T] (this package, host.go): the slow sources above, one value
//     each (Host.caches, one per registered slow source), served
//     until SlowRefresh passes; PCI and IRQ placement are
//     invalidated at once when the class's devices change (checkDevices),
//     and a read cut short by its deadline is not kept. A background
//     source's entry (feed[T], background.go) keeps nothing but when it
//     last published: its runner holds the latest result, replaced by
//     each round, and a snapshot reads it there.
//  3. The sampler's reuse of the last class (Host.SnapshotReusing): the
//     newest whole class a snapshot read (a scrape's, cut short by no
//     deadline), served to the diagnose sampler while younger than half
//     the diagnose interval and to the sminfo runner within its interval,
//     when it was read without error; replaced by every whole class read.
//  4. The static cache (infiniband.Reader): each device's static
//     attributes and its kept files, until its class entry's identity
//     changes (re-registration), StaticMaxAge passes (10 minutes), or the
//     device leaves the class (forget: its files are closed).
//  5. Kept attribute descriptors (hostfs.Attr, owned by the static cache,
//     the port sampler (internal/read/portwatch) and internal/serve/procself):
//     re-read with pread at offset 0, which sysfs and procfs answer
//     afresh; reopened by path once on ENODEV, closed with their static
//     entry or the sampler's port. Counted and capped: at most
//     hostfs.MaxKept (4096) descriptors over the process, past which a
//     file is read with open, read and close (rdma_host_kept_descriptors;
//     about 4.5 KiB of kernel memory each, docs/performance.md).
//  6. Kept netdev attributes (hostfs.Kept, netFS here): operstate,
//     carrier, flags and MTU of the netdevs, one Attr per path for the
//     process's life; a missing file is tried again on every read (its
//     netdev may come back). In the same budget.
//  7. The kept ifindex socket (netdev.Ifindexes, ifindexes here): one
//     socket for the ethtool query's SIOCGIFINDEX, for the process's
//     life; opened again next time if opening failed.
//  8. collector/rendered.go: the samples a collector made from one value
//     of a slow source (PCI, IRQ placement, tuning, GPUs), appended again
//     while the source serves the same value; a new value or a read error
//     renders afresh.
//  9. The gzip writer pool (internal/serve/scrape gzipWriters): a channel of
//     at most two writers, reset for each scrape; a burst beyond makes
//     its own and drops it.
//
// Each stays because it saves a default scrape at least 5% of its CPU
// (make bench-caches: a patch in tools/cacheab turns each off, measured
// against the tree in interleaved rounds), or for a reason that
// benchmark cannot show (the singleflight bounds bursts, the sampler's
// reuse saves idle CPU, the ifindex socket works only on a live host);
// docs/caches.md has the figures, and those of the eight caches measured
// to save less than 5% and deleted (label-slice reuse, the sink's and the
// families' sizes and sort orders from last time, expo.Slab, the text
// buffer pool, the reader's buffer pool and the kept class directory).
package host
