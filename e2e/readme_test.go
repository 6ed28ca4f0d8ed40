// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// architecturePath is the page that carries the layout table (README.md
// did, until it became a user's page).
const architecturePath = "docs/architecture.md"

// TestBinaryImportsNoBenchOrTools: the folders show the architecture. The
// binary's code lives outside bench/ and tools/ (tools/ holds the
// benchmarks and their helpers), so `go list -deps ./cmd/rdma_doctor` names
// no package there; it does name the probe, which moved out of bench/.
func TestBinaryImportsNoBenchOrTools(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./cmd/rdma_doctor")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/rdma_doctor: %v", err)
	}
	const module = "github.com/rdma-doctor/rdma_doctor/"
	deps := strings.Fields(string(out))
	for _, pkg := range deps {
		rel, ok := strings.CutPrefix(pkg, module)
		if !ok {
			continue
		}
		if rel == "bench" || strings.HasPrefix(rel, "bench/") || strings.HasPrefix(rel, "tools/") {
			t.Errorf("the binary imports %s; production code lives outside bench/ and tools/", pkg)
		}
	}
	if !slices.Contains(deps, module+"probe") {
		t.Errorf("go list -deps ./cmd/rdma_doctor does not list %sprobe (the list is not the binary's):\n%s", module, out)
	}
}

// TestOneNetlinkStack: the module's own code, tests included, speaks
// netlink through github.com/mdlayher/netlink only (devlink, ethtool, the
// link watcher, RDMA netlink and DCB). github.com/vishvananda/netlink may
// still come in with a dependency (Mellanox/rdmamap), not by our imports.
func TestOneNetlinkStack(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}: {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, "./...")
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	for line := range strings.Lines(string(out)) {
		pkg, imports, _ := strings.Cut(strings.TrimSpace(line), ": ")
		for _, imp := range strings.Fields(imports) {
			if strings.HasPrefix(imp, "github.com/vishvananda/") {
				t.Errorf("%s imports %s; the project's netlink stack is github.com/mdlayher/netlink", pkg, imp)
			}
		}
	}
}

// TestArchitectureLayout: docs/architecture.md's layout table has one row
// per Go package of the module, as `go list ./...` lists them, and no row
// for a package that is gone, so a newcomer's map of the tree is the tree.
func TestArchitectureLayout(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("go", "list", "-f", "{{.Dir}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	want := map[string]bool{}
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		want[filepath.ToSlash(rel)] = true
	}
	if len(want) == 0 {
		t.Fatal("go list ./... listed no package")
	}

	page, err := os.ReadFile(filepath.Join(root, architecturePath))
	if err != nil {
		t.Fatal(err)
	}
	rows := layoutRows(t, page)
	seen := map[string]bool{}
	for _, pkg := range rows {
		if seen[pkg] {
			t.Errorf("%s's layout lists %s twice", architecturePath, pkg)
		}
		seen[pkg] = true
		if !want[pkg] {
			t.Errorf("%s's layout lists %s, which go list ./... does not", architecturePath, pkg)
		}
	}
	for pkg := range want {
		if !seen[pkg] {
			t.Errorf("package %s has no row in %s's layout table", pkg, architecturePath)
		}
	}
}

// layoutRows is the first column of the table under the page's "## Layout"
// heading: each row's package path, without its backquotes.
func layoutRows(t *testing.T, page []byte) []string {
	t.Helper()
	var rows []string
	in, table := false, false
	sc := bufio.NewScanner(bytes.NewReader(page))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "## Layout":
			in = true
		case !in:
		case strings.HasPrefix(line, "#"):
			in = false
		case strings.HasPrefix(line, "| package |"), strings.HasPrefix(line, "|---"):
			table = true
		case table && strings.HasPrefix(line, "| `"):
			cell, _, _ := strings.Cut(strings.TrimPrefix(line, "| `"), "`")
			rows = append(rows, cell)
		case table:
			in = false
		}
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no layout table under \"## Layout\"", architecturePath)
	}
	return rows
}

// readmeMaxLines is the README's budget: a user's page (what it is, try
// it, install, scrape, collectors, alerts, TLS), with the maintainers'
// material in CONTRIBUTING.md and docs/architecture.md.
const readmeMaxLines = 350

// TestReadmeShort: README.md stays a user's page of at most
// readmeMaxLines lines.
func TestReadmeShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, at most %d: move maintainers' material to CONTRIBUTING.md or docs/architecture.md", n, readmeMaxLines)
	}
}

// mdLink is a markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinks: every relative link of README.md, CONTRIBUTING.md and the
// pages under docs/ names a file that exists, and a link to a heading of
// a markdown page (#anchor) names a heading that page has, as GitHub
// makes anchors. Links into the web are not followed.
func TestDocLinks(t *testing.T) {
	root := repoRoot(t)
	pages := []string{"README.md", "CONTRIBUTING.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, rel)
	}
	anchors := map[string]map[string]bool{}
	for _, page := range pages {
		b, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(stripCode(string(b)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := filepath.Join(root, filepath.Dir(page), file)
			if file == "" {
				path = filepath.Join(root, page)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s: %v", page, target, err)
				continue
			}
			if anchor == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if anchors[path] == nil {
				anchors[path] = headingAnchors(t, path)
			}
			if !anchors[path][anchor] {
				t.Errorf("%s links to %s: %s has no heading with anchor #%s", page, target, file, anchor)
			}
		}
	}
}

// stripCode drops fenced code blocks and inline code spans, where a
// bracket followed by a parenthesis is code, not a link.
func stripCode(doc string) string {
	var b strings.Builder
	fenced := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		b.WriteString(inlineCode.ReplaceAllString(line, "``"))
		b.WriteString("\n")
	}
	return b.String()
}

var inlineCode = regexp.MustCompile("`[^`]*`")

// headingAnchors is the set of anchors GitHub gives the headings of a
// markdown page: lower case, punctuation other than '-' and '_' dropped,
// spaces made '-', a repeated anchor numbered -1, -2, ...
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var a strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				a.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				a.WriteRune(r)
			}
		}
		anchor := a.String()
		for n := 1; set[anchor]; n++ {
			anchor = fmt.Sprintf("%s-%d", a.String(), n)
		}
		set[anchor] = true
	}
	return set
}

// TestContributingAptLine: CONTRIBUTING.md gives the test dependencies as
// one apt-get line, and it installs the same packages as .ci/run, so a
// newcomer's machine has what CI has.
func TestContributingAptLine(t *testing.T) {
	root := repoRoot(t)
	ci := aptPackages(t, filepath.Join(root, ".ci/run"))
	doc := aptPackages(t, filepath.Join(root, "CONTRIBUTING.md"))
	if !slices.Equal(doc, ci) {
		t.Errorf("CONTRIBUTING.md's apt-get line installs\n\t%s\n.ci/run's\n\t%s", strings.Join(doc, " "), strings.Join(ci, " "))
	}
}

// aptPackages is the package list of the one `apt-get install` line in
// path, sorted: the words after install that are not options or a
// redirection.
func aptPackages(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "apt-get install") {
			lines = append(lines, line)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%s has %d apt-get install lines, want 1: %q", path, len(lines), lines)
	}
	_, rest, _ := strings.Cut(lines[0], "apt-get install")
	var pkgs []string
	for _, w := range strings.Fields(rest) {
		if strings.HasPrefix(w, "-") || strings.HasPrefix(w, ">") {
			continue
		}
		pkgs = append(pkgs, w)
	}
	if len(pkgs) == 0 {
		t.Fatalf("%s: the apt-get install line names no package", path)
	}
	slices.Sort(pkgs)
	return pkgs
}

// TestReadmeListsEveryDoc: README's Documentation section links every page
// under docs/, so a page a user needs is never reachable only from the
// source tree.
func TestReadmeListsEveryDoc(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Documentation\n")
	if !ok {
		t.Fatal("README.md has no \"## Documentation\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		link := "](docs/" + filepath.Base(d) + ")"
		if !strings.Contains(section, link) {
			t.Errorf("README's Documentation section does not link docs/%s", filepath.Base(d))
		}
	}
}
