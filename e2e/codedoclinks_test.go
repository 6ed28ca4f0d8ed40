// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// codeDocRef is a page under docs/ named in Go source, with its section
// when one is given: docs/measurements.md#expo.
var codeDocRef = regexp.MustCompile(`\bdocs/([A-Za-z0-9_.-]+\.md)(?:#([A-Za-z0-9_-]+))?`)

// htmlAnchor is an explicit anchor in a page (docs/runbook.md's fault
// classes).
var htmlAnchor = regexp.MustCompile(`<a id="([^"]+)"></a>`)

// TestCodeDocLinks: a comment keeps the reason for the code and sends the
// reader to a page of docs/ for the figures behind it (issue 39: comments
// say why, not history), so every docs/<page>.md or
// docs/<page>.md#<section> that Go source names must exist, the section
// as one of the page's headings or explicit anchors (<a id="cable">): a
// page renamed or a heading reworded would leave the comment pointing
// nowhere.
func TestCodeDocLinks(t *testing.T) {
	root := repoRoot(t)
	anchors := map[string]map[string]bool{}
	refs := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		for _, m := range codeDocRef.FindAllStringSubmatch(string(b), -1) {
			refs++
			page := filepath.Join(root, "docs", m[1])
			if _, err := os.Stat(page); err != nil {
				t.Errorf("%s names docs/%s: %v", rel, m[1], err)
				continue
			}
			if m[2] == "" {
				continue
			}
			if anchors[page] == nil {
				anchors[page] = headingAnchors(t, page)
				text, err := os.ReadFile(page)
				if err != nil {
					return err
				}
				for _, a := range htmlAnchor.FindAllStringSubmatch(string(text), -1) {
					anchors[page][a[1]] = true
				}
			}
			if !anchors[page][m[2]] {
				t.Errorf("%s names %s: docs/%s has no heading or anchor of that name", rel, m[0], m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if refs == 0 {
		t.Fatal("no Go file names a page of docs/: the walk found nothing")
	}
}
