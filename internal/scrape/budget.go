// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package scrape

import (
	"fmt"
	"net/http"
	"sync"
)

// What a scrape allocates to answer, beyond the collection that
// concurrent scrapes share (TestScrapeMemory, dgx-h100's 1,038 samples):
// 86 kB in the text format and in protobuf (a 36 kB write buffer, and
// grouping and sorting at about 48 bytes a sample); through
// client_golang's registry 870 kB in protobuf and 2.9 MB in its text
// debugging format (a dto.Metric, its label pairs and a const metric per
// sample, then the formatting): about 2,800 bytes a sample. A gzip
// writer, for a scrape that asks for gzip and finds none free, is about
// 830 kB; a write buffer 64 kB. The exporter's own go_* and promhttp_*
// series, gathered through client_golang's registry on every scrape, add
// about 67 kB in text and 90 kB in protobuf (dgx-h100, with and without
// them, same test), and up to 133 kB in one CI run of
// TestScrapeMemoryOwnSeries (the runtime's histograms vary with what the
// process has done), hence 128 KiB reserved.
const (
	fastSampleCost = 48
	slowSampleCost = 3200
	gzipCost       = 850 << 10
	bufferCost     = 64 << 10
	ownSeriesCost  = 128 << 10
)

// scrapeCost estimates the memory a scrape of n samples holds while it
// answers.
func scrapeCost(n, perSample int, gzip bool) int64 {
	c := int64(bufferCost) + int64(n)*int64(perSample)
	if gzip {
		c += gzipCost
	}
	return c
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
