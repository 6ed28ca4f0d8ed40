// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import "context"

// Collectors with background work (sminfo, iblinkinfo) run it for as long
// as the server does; a scrape only reads their latest results.
func init() {
	addServerHook(func(ctx context.Context, s *Server) error {
		s.Agg.Start(ctx)
		return nil
	})
}
