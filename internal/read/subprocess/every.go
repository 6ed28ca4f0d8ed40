// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package subprocess

import (
	"context"
	"time"
)

// Every runs f now and then every interval until ctx ends: the loop of the
// background runners (sminfo, iblinkinfo) that a scrape only reads from.
func Every(ctx context.Context, interval time.Duration, f func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		f(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
