// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package host

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Every listed source has its own non-empty name, and once read it is in
// Ages under that name, at the age the clock says; a background source
// the options leave off never is.
func TestSourcesTable(t *testing.T) {
	h, _, _, now := faultyHost(t, Options{SlowRefresh: time.Minute})
	seen := map[string]bool{}
	for _, src := range sources {
		if src.Name() == "" {
			t.Errorf("a source of type %T has no name", src)
		}
		if seen[src.Name()] {
			t.Errorf("two sources are named %q", src.Name())
		}
		seen[src.Name()] = true
	}
	if ages := h.Ages(); len(ages) != 0 {
		t.Errorf("ages before any read: %v, want none", ages)
	}
	s := h.Snapshot()
	for _, src := range sources {
		// The fixture is not the running kernel: devlink answers
		// ErrNotLive, which is a reading too.
		_ = src.load(context.Background(), s)
	}
	*now = now.Add(5 * time.Second)
	ages := h.Ages()
	slow := 0
	for _, src := range sources {
		age, ok := ages[src.Name()]
		if src.Freshness() == Published {
			if ok {
				t.Errorf("Ages()[%q] = %v for a background source the options leave off", src.Name(), age)
			}
			continue
		}
		slow++
		if !ok || age != 5*time.Second {
			t.Errorf("Ages()[%q] = %v, %v after a read 5s ago, want 5s", src.Name(), age, ok)
		}
	}
	if len(ages) != slow {
		t.Errorf("Ages has %d sources, the table %d slow ones: %v", len(ages), slow, ages)
	}
}

// A new slow source is its declaration and its line in the table: the
// generic getter reads it through the Host's cache, and Ages reports it.
func TestSourceAddedByDeclaration(t *testing.T) {
	reads := 0
	fake := &Source[int]{name: "fake", read: func(context.Context, *Snapshot) (int, error) {
		reads++
		return 42, nil
	}}
	saved := sources
	sources = append(slices.Clip(sources), fake)
	t.Cleanup(func() { sources = saved })

	h, _, _, now := faultyHost(t, Options{SlowRefresh: time.Minute})
	ctx := context.Background()
	for range 2 {
		if v, err := get(ctx, h.Snapshot(), fake); v != 42 || err != nil {
			t.Fatalf("get: %d %v, want 42", v, err)
		}
	}
	if reads != 1 {
		t.Errorf("two snapshots within SlowRefresh read the source %d times, want 1", reads)
	}
	*now = now.Add(time.Second)
	if age, ok := h.Ages()["fake"]; !ok || age != time.Second {
		t.Errorf("Ages()[fake] = %v, %v, want 1s", age, ok)
	}
	*now = now.Add(time.Minute)
	if _, err := get(ctx, h.Snapshot(), fake); err != nil || reads != 2 {
		t.Errorf("after SlowRefresh: %d reads (err %v), want 2", reads, err)
	}
}

// Every Source the package declares is in the table: one left out would
// have no cache (its getter panics) and no age.
func TestSourcesAllListed(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, src := range sources {
		listed[src.Name()] = true
	}
	declared := 0
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				for _, v := range spec.(*ast.ValueSpec).Values {
					name, ok := sourceName(v)
					if !ok {
						continue
					}
					declared++
					if !listed[name] {
						t.Errorf("%s declares source %q, which sources does not list", fset.Position(v.Pos()), name)
					}
				}
			}
		}
	}
	if declared != len(sources) {
		t.Errorf("%d sources declared, %d listed", declared, len(sources))
	}
}

// sourceName is the name of a &Source[T]{name: "...", ...} or
// &Background[T]{...} literal.
func sourceName(e ast.Expr) (string, bool) {
	u, ok := e.(*ast.UnaryExpr)
	if !ok || u.Op != token.AND {
		return "", false
	}
	lit, ok := u.X.(*ast.CompositeLit)
	if !ok {
		return "", false
	}
	ix, ok := lit.Type.(*ast.IndexExpr)
	if !ok {
		return "", false
	}
	if id, ok := ix.X.(*ast.Ident); !ok || id.Name != "Source" && id.Name != "Background" {
		return "", false
	}
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "name" {
			if b, ok := kv.Value.(*ast.BasicLit); ok {
				return strings.Trim(b.Value, `"`), true
			}
		}
	}
	return "", true
}
