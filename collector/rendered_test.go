// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"errors"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

// rendered makes a value's samples once and serves them again for the
// same value; a new value, or a read that ended in an error (a stale
// value served past a wedged read), is rendered afresh and an errored
// one is not kept.
func TestRendered(t *testing.T) {
	d := expo.NewDesc("rdma_test", "test.", "v")
	var r rendered[int]
	calls := 0
	renderOf := func(v string, err error) func(*sink) error {
		return func(s *sink) error {
			calls++
			s.gauge(d, 1, v)
			return err
		}
	}
	errParse := errors.New("parse error in a file of the value")
	got := func(key int, readErr error, v string, err error) (*sink, error) {
		var s sink
		return &s, r.append(&s, key, readErr, renderOf(v, err))
	}
	s, err := got(1, nil, "a", errParse)
	if calls != 1 || len(s.all()) != 1 || !errors.Is(err, errParse) {
		t.Fatalf("first: %d renders, %d samples, %v", calls, len(s.all()), err)
	}
	s, err = got(1, nil, "b", nil)
	if calls != 1 || len(s.all()) != 1 || !errors.Is(err, errParse) {
		t.Errorf("same value: %d renders, %d samples, %v; want the kept samples and error", calls, len(s.all()), err)
	}
	stale := errors.New("deadline: the previous value served")
	s, _ = got(1, stale, "c", nil)
	if calls != 2 || len(s.all()) != 1 {
		t.Errorf("after a failed read: %d renders, %d samples; want a fresh render", calls, len(s.all()))
	}
	if _, err = got(1, nil, "d", nil); calls != 2 || !errors.Is(err, errParse) {
		t.Errorf("a render after a failed read was kept: %d renders, %v", calls, err)
	}
	if _, err = got(2, nil, "e", nil); calls != 3 || err != nil {
		t.Errorf("new value: %d renders, %v; want a fresh render", calls, err)
	}
}
