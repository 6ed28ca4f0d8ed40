// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

// What a scrape allocates to answer, beyond the collection that
// concurrent scrapes share, each figure an upper estimate of what
// TestScrapeMemory, TestScrapeMemoryFabric and TestScrapeMemoryOwnSeries
// measure, with a margin (the measurements: docs/measurements.md#scrape):
// a sample written by expo (text or protobuf: grouping and sorting), a
// sample through client_golang's registry (a dto.Metric, its label pairs
// and a const metric each, then the formatting; names escaped with dots
// take that path), a gzip writer for a scrape that finds none free, the
// write buffer, the one decompressor that a non-gzip scrape reads a
// Block's families through (a Block's families are shared, not made
// again, and a gzip scrape splices them and holds nothing more), a
// debugging-format scrape, and the exporter's own go_* and promhttp_*
// series, gathered through client_golang's registry on every scrape
// (the runtime's histograms vary with what the process has done). The
// debugging formats decode one series at a time, little for one scrape
// alone, but prototext allocates for every series and that garbage
// piles up while a collection marks, so two at once hold many times
// one's: hence one at a time (debugScrapes) and debugCost.
const (
	fastSampleCost = 48
	slowSampleCost = 3600
	gzipCost       = 850 << 10
	bufferCost     = 64 << 10
	inflateCost    = 64 << 10
	debugCost      = 4 << 20
	ownSeriesCost  = 128 << 10
)

// debugScrapes is how many scrapes in a protobuf debugging format (or
// with names escaped with dots) run at once, and debugWaiting how many
// more wait for one of them (within their deadline); more get 503. A
// person reads them, not Prometheus: a few suffice, and they never take
// the slots of --web.max-requests that Prometheus' scrapes need.
const (
	debugScrapes = 1
	debugWaiting = 32
)

// formatKind is how a scrape is written, for what it holds.
type formatKind int

const (
	// kindFast: the text format and the delimited protobuf (expo).
	kindFast formatKind = iota
	// kindDebug: the protobuf debugging formats (expo.WriteDebug).
	kindDebug
	// kindRegistry: client_golang's registry, a Block's samples made
	// again (names escaped with dots).
	kindRegistry
)

// counts are a scrape's samples: its own, and those a Block holds
// rendered (which only a registry makes again).
type counts struct {
	samples, blockSamples int
	blocks                bool
}

// countOf counts a collection's samples.
func countOf(metrics [][]prometheus.Metric) counts {
	var c counts
	for _, ms := range metrics {
		for _, x := range ms {
			if b, ok := x.(*expo.Block); ok {
				c.blocks = true
				c.blockSamples += b.Len()
				continue
			}
			c.samples++
		}
	}
	return c
}

// scrapeCost estimates the memory a scrape holds while it answers: what
// it holds, not what it writes, so a spliced or streamed Block costs the
// scrape nothing but the decompressor: charged by what it writes, a gzip
// scrape of a large fabric was refused for memory it never held.
func scrapeCost(c counts, kind formatKind, gzip bool) int64 {
	cost := int64(bufferCost)
	switch kind {
	case kindRegistry:
		cost += int64(c.samples+c.blockSamples) * slowSampleCost
	case kindDebug:
		cost += int64(c.samples)*fastSampleCost + debugCost + inflateCost
	default:
		cost += int64(c.samples) * fastSampleCost
		if c.blocks && !gzip {
			cost += inflateCost
		}
	}
	if gzip {
		cost += gzipCost
	}
	return cost
}

// memoryBudget bounds the memory that concurrent scrapes hold while they
// answer (--web.max-requests-memory): --web.max-requests bounds their
// number, but one scrape's memory grows with the samples (a fabric of
// 200 thousand links) and with the format.
type memoryBudget struct {
	mu          sync.Mutex
	used, limit int64
}

// take reserves cost and reports whether it fit. A scrape alone always
// fits, however large: a host whose one scrape exceeds the budget is
// still scraped, one scrape at a time.
func (b *memoryBudget) take(cost int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used > 0 && b.used+cost > b.limit {
		return false
	}
	b.used += cost
	return true
}

func (b *memoryBudget) give(cost int64) {
	b.mu.Lock()
	b.used -= cost
	b.mu.Unlock()
}

// reserve takes a scrape's memory from the budget, or answers 503.
func (m *handler) reserve(w http.ResponseWriter, cost int64) (release func(), ok bool) {
	if m.memory == nil {
		return func() {}, true
	}
	if !m.memory.take(cost) {
		http.Error(w, fmt.Sprintf("too much memory held by parallel scrapes (limit %d bytes, --web.max-requests-memory)", m.memory.limit), http.StatusServiceUnavailable)
		return nil, false
	}
	return func() { m.memory.give(cost) }, true
}

// A client must take each rateChunk bytes of an answer within
// rateWindow, at least 6.4 KiB a second, or it is dropped: otherwise a
// client that asks and never reads holds its scrape's slot and memory
// for the whole write timeout (--scrape.timeout + 30 s), and a few of
// them make every other scrape a 503 (TestScrapeDropsNonReader).
// Prometheus reads a scrape at network speed; 6.4 KiB/s is a modem's.
const (
	rateChunk  = 32 << 10
	rateWindow = 5 * time.Second
	// minTransferRate is rateChunk per rateWindow, in bytes a second.
	minTransferRate = int64(rateChunk / (rateWindow / time.Second))
)
