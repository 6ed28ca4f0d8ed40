// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRealGoTestJSON runs the real `go test -json` on a small module with a
// passing, a failing and a skipped test, so the summary is checked against
// what the go command really prints.
func TestRealGoTestJSON(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.22\n")
	write("m_test.go", `package m

import "testing"

func TestPass(t *testing.T) { t.Log("quiet when passing") }
func TestFail(t *testing.T) { t.Error("the failure message") }
func TestSkip(t *testing.T) { t.Skip("needs a tool this machine lacks") }
func TestSub(t *testing.T) {
	t.Run("inner", func(t *testing.T) { t.Skip("inner reason") })
}
`)
	cmd := exec.Command("go", "test", "-json", "-count=1", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	js, _ := cmd.Output() // fails: TestFail
	var out strings.Builder
	failed, err := run(strings.NewReader(string(js)), &out)
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !failed {
		t.Errorf("a failing test was not reported as failed:\n%s", got)
	}
	for _, want := range []string{
		"--- FAIL: TestFail",
		"the failure message",
		"FAIL\texample.com/m",
		"skipped: 2 test(s)",
		"example.com/m TestSkip: m_test.go:7: needs a tool this machine lacks",
		"example.com/m TestSub/inner: m_test.go:9: inner reason",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"quiet when passing", "=== RUN", "\nPASS\n"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("summary has %q (go test without -v would not print it):\n%s", unwanted, got)
		}
	}
}

// TestPassingRunHasNoSkips: a run with nothing skipped says so and passes;
// a line that is not JSON (a go command error) is passed through.
func TestPassingRunHasNoSkips(t *testing.T) {
	in := `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Output":"PASS\n"}
{"Action":"output","Package":"p","Output":"ok  \tp\t0.01s\n"}
{"Action":"pass","Package":"p"}
go: warning: something the go command said
`
	var out strings.Builder
	failed, err := run(strings.NewReader(in), &out)
	if err != nil || failed {
		t.Fatalf("failed=%v err=%v", failed, err)
	}
	want := "ok  \tp\t0.01s\ngo: warning: something the go command said\n\nskipped: none\n"
	if out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

// TestBuildFailureFails: a package that does not compile fails the run.
func TestBuildFailureFails(t *testing.T) {
	in := `{"ImportPath":"p","Action":"build-output","Output":"p/x.go:3:1: syntax error\n"}
{"ImportPath":"p","Action":"build-fail"}
{"Action":"output","Package":"p","Output":"FAIL\tp [build failed]\n"}
{"Action":"fail","Package":"p"}
`
	var out strings.Builder
	failed, _ := run(strings.NewReader(in), &out)
	if !failed || !strings.Contains(out.String(), "syntax error") {
		t.Errorf("failed=%v output:\n%s", failed, out.String())
	}
}
