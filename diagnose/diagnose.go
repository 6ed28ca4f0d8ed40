// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package diagnose turns the guide's troubleshooting checklist and the
// research's check catalogue into rule checks. A check reads a Reading:
// the host through Host, a narrow interface over the host package's
// snapshot (the same typed snapshots the collectors export, read once per
// sample; sminfo and the fabric sweep among them), the server's probe
// (ProbeResults), and, for delta checks, the History of counter samples. It returns findings:
// severity, target, observed, expected, evidence, remedy and the
// remediation action id. The Evaluator runs every check, turning a check that panics or errors
// into a skip finding that carries the error: a broken check never crashes
// the server and never passes silently.
//
// diagnose is the engine: it evaluates the checks it is given and
// imports none. The checks live by concern under diagnose/checks (link,
// placement, fabric; one file per concern), diagnose/checks lists them
// all, and diagnose/report renders reports. A check whose data no
// collector reads yet is
// registered with Pending set and no Run: it reports skip with that
// reason, and wiring the data in later means a method on Host (read in
// hostView), a Source with its reason in unavailable, and writing Run.
// rdma_diagnose_status, the metric of a report,
// is rendered with the other metrics (collector.NewDiagnoseStatus).
package diagnose

import (
	"bytes"
	"fmt"
	"path"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/fabric"
	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// SchemaVersion is the version of the JSON report (docs/diagnose-schema.md).
// Bump it on any incompatible change of the JSON shape or of a field's
// meaning; adding a field is compatible. 2: summary.problems. 3: faults,
// which the text and HTML formats now lead with.
const SchemaVersion = 3

// Severity of a finding.
type Severity string

// Severities. Skip means the check could not judge this target: not
// applicable, not readable, not configured, or its data is not read yet.
const (
	Pass Severity = "pass"
	Warn Severity = "warn"
	Fail Severity = "fail"
	Skip Severity = "skip"
)

// rank orders severities for "worst wins": fail > warn > pass > skip.
func (s Severity) rank() int {
	switch s {
	case Fail:
		return 3
	case Warn:
		return 2
	case Pass:
		return 1
	}
	return 0
}

// Worse reports whether s is worse than t.
func (s Severity) Worse(t Severity) bool { return s.rank() > t.rank() }

// Finding is one judgement of one check on one target.
type Finding struct {
	// Check is the check id (port.rate).
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	// Target is what was judged: "mlx5_0/1" (device/port), "mlx5_0"
	// (device), "host", a netdev ("ib0") or an IRQ ("irq 123").
	Target   string `json:"target"`
	Observed string `json:"observed,omitempty"`
	Expected string `json:"expected,omitempty"`
	// Evidence is what the judgement rests on: the file, the values, the
	// counter increase over the window. For a skip, the reason.
	Evidence string `json:"evidence,omitempty"`
	// Remedy is the command or step to run, specific to the target.
	Remedy string `json:"remedy,omitempty"`
	// Action is the id of the remediate action that fixes it, if any.
	Action string `json:"action,omitempty"`
	// Unknown marks a finding the data cannot decide, such as a saturated
	// counter that has stopped counting: it is never reported as clean.
	Unknown bool `json:"unknown,omitempty"`
	// BlastRadius is, for a fabric finding about switch ports, whose
	// traffic crosses each port's link (diagnose/checks/fabric).
	BlastRadius []BlastRadius `json:"blast_radius,omitempty"`
	// Seen is what a fabric finding saw on which link, for the grouping
	// into faults (faults.go); its text is in the fields above, so the
	// JSON leaves it out. A pointer: every finding carries the field, few
	// set it.
	Seen *[]FaultSeen `json:"-"`
}

// Check is one rule.
type Check struct {
	ID    string
	Title string
	// Reads lists the data sources the check needs. The evaluator skips
	// the check, with the reason, when one is not available.
	Reads []Source
	// Doc says what the check means and Remedy what to do in general; both
	// go into docs/diagnose.md (TestDocsListEveryCheck keeps them there).
	Doc, Remedy string
	// Run judges the reading. Nil for a check whose data no collector
	// reads yet; Pending then says why it skips.
	Run     func(s *Reading, h *History, cfg *config.Config) ([]Finding, error)
	Pending string
}

// CheckList is the catalogue being built: each concern file has one
// function that adds its checks (no init() hooks between files).
type CheckList []*Check

// Register adds a check.
func (l *CheckList) Register(c *Check) {
	for _, o := range *l {
		if o.ID == c.ID {
			panic("diagnose: duplicate check id " + c.ID) // a bug in a concern file
		}
	}
	*l = append(*l, c)
}

// Evaluator runs a selection of checks.
type Evaluator struct {
	cfg    *config.Config
	checks []*Check
	// topo is diagnose.fabric_topology, read once here; topoErr why it
	// could not be read (fabric.topology is then unknown, with the reason).
	topo    *fabric.Topology
	topoErr error
}

// NewEvaluator selects the checks of all to run: every check not disabled
// in the config, and, when only is not empty, only those matching one of its
// patterns (check ids or path.Match globs). A pattern in the config's
// disable list or in only that matches no check is an error: a typo must
// not silently keep a check on or select nothing.
func NewEvaluator(cfg *config.Config, only []string, all []*Check) (*Evaluator, error) {
	if cfg == nil {
		cfg = &config.Config{}
	}
	matchesAny := func(p string) bool {
		for _, c := range all {
			if ok, _ := path.Match(p, c.ID); ok {
				return true
			}
		}
		return false
	}
	for _, p := range cfg.Diagnose.Disable {
		if !matchesAny(p.Pattern) {
			return nil, fmt.Errorf("config diagnose.disable (line %d): %q matches no check id (see rdma_doctor diagnose --help or docs/diagnose.md)", p.Line, p.Pattern)
		}
	}
	for _, p := range only {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("check pattern %q: %w", p, err)
		}
		if !matchesAny(p) {
			return nil, fmt.Errorf("check pattern %q matches no check id", p)
		}
	}
	e := &Evaluator{cfg: cfg}
	if p := cfg.Diagnose.FabricTopology; p != "" {
		// An unreadable file does not stop the evaluator: the server
		// keeps running every other check and fabric.topology says why
		// it cannot judge; --config.check and the diagnose command fail
		// on it (TopologyErr).
		if e.topo, e.topoErr = LoadTopology(p); e.topoErr != nil {
			e.topoErr = fmt.Errorf("config diagnose.fabric_topology: %w", e.topoErr)
		}
	}
	for _, c := range all {
		if cfg.Diagnose.Disabled(c.ID) {
			continue
		}
		if len(only) > 0 && !slices.ContainsFunc(only, func(p string) bool { ok, _ := path.Match(p, c.ID); return ok }) {
			continue
		}
		e.checks = append(e.checks, c)
	}
	return e, nil
}

// Checks returns the selected checks.
func (e *Evaluator) Checks() []*Check { return e.checks }

// TopologyErr is why diagnose.fabric_topology could not be read; nil
// when it was read or none is configured.
func (e *Evaluator) TopologyErr() error { return e.topoErr }

// CheckInfo describes a check in a report.
type CheckInfo struct {
	ID     string   `json:"id"`
	Title  string   `json:"title"`
	Reads  []Source `json:"reads"`
	Status Severity `json:"status"`
}

// Summary counts findings by severity and lists the problems: what a
// person reads first.
type Summary struct {
	Pass int `json:"pass"`
	Warn int `json:"warn"`
	Fail int `json:"fail"`
	Skip int `json:"skip"`
	// Problems are the failures and warnings grouped by check and fix,
	// failures first (Problems).
	Problems []Problem `json:"problems"`
}

// Report is one evaluation.
type Report struct {
	Version int       `json:"version"`
	Host    string    `json:"host,omitempty"`
	Time    time.Time `json:"time"`
	// Samples is how many counter samples the delta checks had, and
	// WindowSeconds the time between the oldest and the newest.
	Samples       int     `json:"samples"`
	WindowSeconds float64 `json:"window_seconds"`
	// Status is the worst severity of any finding (skip when all skip).
	Status  Severity `json:"status"`
	Summary Summary  `json:"summary"`
	// Faults are the failures and warnings grouped as the pages group
	// them: one per physical link and class of fault, naming both ends
	// (faults.go); left out when there are none.
	Faults   []Fault     `json:"faults,omitempty"`
	Checks   []CheckInfo `json:"checks"`
	Findings []Finding   `json:"findings"`
}

// Evaluate runs the selected checks on the reading and history.
func (e *Evaluator) Evaluate(s *Reading, h *History) *Report {
	if h == nil {
		h = NewHistory(0, 0)
	}
	if e.topo != nil || e.topoErr != nil {
		// A copy: the caller's reading is not changed.
		sc := *s
		sc.ExpectedTopology, sc.ExpectedTopologyFile, sc.ExpectedTopologyErr = e.topo, e.cfg.Diagnose.FabricTopology, e.topoErr
		s = &sc
	}
	r := &Report{Version: SchemaVersion, Host: s.Hostname, Time: s.Time, Samples: h.Len(), Status: Skip, Findings: []Finding{}}
	r.WindowSeconds = h.Span().Seconds()
	for _, c := range e.checks {
		fs := runCheck(c, s, h, e.cfg)
		info := CheckInfo{ID: c.ID, Title: c.Title, Reads: c.Reads, Status: Skip}
		if info.Reads == nil {
			info.Reads = []Source{}
		}
		for _, f := range fs {
			if f.Severity.Worse(info.Status) {
				info.Status = f.Severity
			}
			if f.Severity.Worse(r.Status) {
				r.Status = f.Severity
			}
			switch f.Severity {
			case Pass:
				r.Summary.Pass++
			case Warn:
				r.Summary.Warn++
			case Fail:
				r.Summary.Fail++
			default:
				r.Summary.Skip++
			}
		}
		r.Checks = append(r.Checks, info)
		r.Findings = append(r.Findings, fs...)
	}
	r.Summary.Problems = Problems(r.Findings)
	r.Faults = groupFaults(r.Findings, newFaultContext(s, h))
	return r
}

// runCheck runs one check and guarantees at least one finding: a missing
// data source, a pending check, an error, a panic and an empty result all
// become skip findings that say why.
func runCheck(c *Check, s *Reading, h *History, cfg *config.Config) (out []Finding) {
	skip := func(reason string) []Finding {
		return []Finding{{Check: c.ID, Severity: Skip, Target: "host", Evidence: reason}}
	}
	if c.Run == nil {
		return skip(c.Pending)
	}
	for _, src := range c.Reads {
		if reason := s.Unavailable(src); reason != "" {
			return skip(reason)
		}
	}
	defer func() {
		if v := recover(); v != nil {
			out = skip(fmt.Sprintf("check failed: panic: %v (please report; stack: %s)", v, firstFrames(debug.Stack())))
		}
	}()
	fs, err := c.Run(s, h, cfg)
	for i := range fs {
		fs[i].Check = c.ID
		if fs[i].Severity == "" {
			fs[i].Severity = Skip
		}
		if fs[i].Target == "" {
			fs[i].Target = "host"
		}
	}
	if err != nil {
		fs = append(fs, Finding{Check: c.ID, Severity: Skip, Target: "host", Evidence: "check failed: " + err.Error()})
	}
	if len(fs) == 0 {
		return skip("nothing to judge on this host")
	}
	return fs
}

// firstFrames keeps the panicking frame of a stack trace, short enough for
// a finding.
func firstFrames(stack []byte) string {
	lines := strings.Split(string(stack), "\n")
	// Skip the goroutine header, debug.Stack, this package's recover and
	// the runtime's panic frames; keep the next frame.
	for i, l := range lines {
		if strings.Contains(l, "panic(") && i+3 < len(lines) {
			return strings.TrimSpace(lines[i+2]) + " " + strings.TrimSpace(lines[i+3])
		}
	}
	return ""
}

// LoadTopology reads and parses the expected topology file, bounded by
// fabric.MaxTopologyBytes.
func LoadTopology(path string) (*fabric.Topology, error) {
	b, err := hostfs.ReadBounded(path, fabric.MaxTopologyBytes)
	if err != nil {
		return nil, err
	}
	t, err := fabric.ParseTopology(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}
