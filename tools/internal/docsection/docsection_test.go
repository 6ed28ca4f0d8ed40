// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package docsection

import "testing"

const b, e = "<!-- b -->", "<!-- e -->"

func TestSpliceReplacesOnlyTheSection(t *testing.T) {
	doc := "# Title\n\nbefore\n\n" + b + "\nold\n" + e + "\n\nafter\n"
	got, err := Splice(doc, b+"\nnew\n"+e+"\n", b, e)
	if err != nil {
		t.Fatal(err)
	}
	if want := "# Title\n\nbefore\n\n" + b + "\nnew\n" + e + "\n\nafter\n"; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	sec, err := Extract(got, b, e)
	if err != nil || sec != b+"\nnew\n"+e+"\n" {
		t.Errorf("Extract = %q, %v", sec, err)
	}
}

func TestSpliceAppendsWhenAbsent(t *testing.T) {
	got, err := Splice("# Title\nlast line", b+"\nx\n"+e+"\n", b, e)
	if err != nil {
		t.Fatal(err)
	}
	if want := "# Title\nlast line\n\n" + b + "\nx\n" + e + "\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if sec, err := Extract("# Title\n", b, e); sec != "" || err != nil {
		t.Errorf("Extract of a document without the section = %q, %v", sec, err)
	}
}

func TestMarkersOutOfOrder(t *testing.T) {
	for _, doc := range []string{e + "\n" + b + "\n", b + "\nno end\n", "no begin\n" + e + "\n"} {
		if _, err := Splice(doc, "x", b, e); err == nil {
			t.Errorf("Splice(%q): no error", doc)
		}
		if _, err := Extract(doc, b, e); err == nil {
			t.Errorf("Extract(%q): no error", doc)
		}
	}
}
