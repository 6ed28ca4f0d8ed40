// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"
)

func TestHandler(t *testing.T) {
	s := NewStore()
	s.Record(Result{Peer: "n2", Test: "ib_write_lat", Device: "mlx5_0", Port: 1, Start: time.Unix(1700000000, 0), Duration: time.Second,
		ErrorKind: "retry_exceeded", Error: "perftest client: retry_exceeded"})
	rec := httptest.NewRecorder()
	Handler{Store: s}.ServeHTTP(rec, httptest.NewRequest("GET", "/probe", nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var got struct {
		Version int     `json:"version"`
		Entries []Entry `json:"entries"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("%v:\n%s", err, rec.Body.String())
	}
	if got.Version != 1 || len(got.Entries) != 1 || got.Entries[0].Key.Peer != "n2" || got.Entries[0].Runs != 1 ||
		got.Entries[0].Failures["retry_exceeded"] != 1 {
		t.Errorf("%+v", got)
	}
}
