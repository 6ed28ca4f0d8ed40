// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"encoding/json"
	"net/http"
)

// Handler serves the latest results of a store as JSON (/probe).
type Handler struct{ Store Reader }

func (h Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(struct {
		Version int     `json:"version"`
		Entries []Entry `json:"entries"`
	}{1, h.Store.Latest()})
}
