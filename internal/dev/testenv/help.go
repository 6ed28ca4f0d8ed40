// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxHelp bounds a metric's HELP: one short sentence saying what the
// value is and its unit. Why it matters, how it is read and what it costs
// belong in the collector's page under docs/, where they can be kept
// true; a HELP is read in a query editor's tooltip.
const MaxHelp = 120

// internalName matches what a HELP must not name: a Go identifier of a
// package (host.Options, hostfs.MaxKept), a source path, or the
// "rdma_doctor:" prefix every series' rdma_ name already says.
var internalName = regexp.MustCompile(`rdma_doctor:|\b[a-z][a-z0-9]*\.[A-Z][A-Za-z0-9]*\b|\binternal/|\b\w+\.go\b|\b[A-Z]\w*\(\)`)

// CheckHelp says what is wrong with a metric's HELP, nil if nothing: it
// must be one sentence of at most MaxHelp characters, naming no internal
// identifier (flag names are fine).
func CheckHelp(help string) error {
	var bad []string
	if strings.TrimSpace(help) == "" {
		bad = append(bad, "empty")
	}
	if n := len([]rune(help)); n > MaxHelp {
		bad = append(bad, fmt.Sprintf("%d characters, over %d", n, MaxHelp))
	}
	if m := internalName.FindString(help); m != "" {
		bad = append(bad, fmt.Sprintf("names %q", m))
	}
	if strings.Contains(strings.TrimSuffix(help, "."), ". ") {
		bad = append(bad, "more than one sentence")
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("HELP %q: %s", help, strings.Join(bad, ", "))
}

// descHelp is the help in a Desc's String(), the only place client_golang
// shows it before a metric is gathered.
var descHelp = regexp.MustCompile(`help: ("(?:[^"\\]|\\.)*")`)

// CheckDescribed runs CheckHelp on the HELP of every Desc c describes,
// and returns how many it checked.
func CheckDescribed(t testing.TB, c prometheus.Collector) int {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	n := 0
	for d := range ch {
		m := descHelp.FindStringSubmatch(d.String())
		if m == nil {
			t.Errorf("no help in %s", d)
			continue
		}
		help, err := strconv.Unquote(m[1])
		if err != nil {
			t.Errorf("%s: %v", d, err)
			continue
		}
		if err := CheckHelp(help); err != nil {
			t.Errorf("%s: %v", d, err)
		}
		n++
	}
	return n
}
