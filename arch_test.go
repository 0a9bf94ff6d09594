package mptx_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestArchitectureRule enforces the one architecture rule on the core
// packages (cc, pacing, chunk, multipath): no clock reads, no sleeping, no
// goroutines, no global randomness, no cgo, and imports only from the
// standard library's pure packages, the leaves units and vtime, each other
// (multipath → cc, pacing, chunk) and golang.org/x/time/rate. Test files
// are exempt (they may use the testing clock of benchmarks).
func TestArchitectureRule(t *testing.T) {
	allowedModule := map[string][]string{
		"cc":        {"github.com/mptx-dev/mptx/units", "github.com/mptx-dev/mptx/vtime"},
		"pacing":    {"github.com/mptx-dev/mptx/units", "github.com/mptx-dev/mptx/vtime", "golang.org/x/time/rate"},
		"chunk":     {"github.com/mptx-dev/mptx/units", "github.com/mptx-dev/mptx/vtime"},
		"multipath": {"github.com/mptx-dev/mptx/units", "github.com/mptx-dev/mptx/vtime", "github.com/mptx-dev/mptx/cc", "github.com/mptx-dev/mptx/pacing", "github.com/mptx-dev/mptx/chunk"},
	}
	forbiddenStd := map[string]bool{
		"C": true, "os": true, "net": true, "log": true, "log/slog": true, "syscall": true,
		"unsafe": true, "os/exec": true, "io/ioutil": true, "math/rand": true, "runtime": true,
		"crypto/rand": true, "sync": true,
	}
	// Functions of package time that read the clock or sleep.
	forbiddenTime := map[string]bool{
		"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
		"AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true,
	}
	// Package-level functions of math/rand/v2 use the global source.
	allowedRandV2 := map[string]bool{"New": true, "NewPCG": true, "NewChaCha8": true, "NewZipf": true}
	for pkg, allowed := range allowedModule {
		files, err := filepath.Glob(filepath.Join(pkg, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("package %s: no files (%v)", pkg, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, f, src, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]string{} // local name → import path
			for _, imp := range file.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				name := path[strings.LastIndex(path, "/")+1:]
				if path == "math/rand/v2" {
					name = "rand"
				}
				if imp.Name != nil {
					name = imp.Name.Name
				}
				names[name] = path
				if forbiddenStd[path] {
					t.Errorf("%s imports %q: core packages do no I/O, locking, cgo or global randomness", f, path)
					continue
				}
				if strings.Contains(path, ".") || strings.HasPrefix(path, "mptx") {
					ok := false
					for _, a := range allowed {
						if path == a {
							ok = true
						}
					}
					if !ok {
						t.Errorf("%s imports %q; package %s may import only %v from outside the standard library", f, path, pkg, allowed)
					}
				}
			}
			ast.Inspect(file, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.GoStmt:
					t.Errorf("%s: a go statement: core packages start no goroutines", fset.Position(x.Pos()))
				case *ast.SelectorExpr:
					id, ok := x.X.(*ast.Ident)
					if !ok {
						break
					}
					switch names[id.Name] {
					case "time":
						if forbiddenTime[x.Sel.Name] {
							t.Errorf("%s: time.%s: core packages never read a clock or sleep", fset.Position(x.Pos()), x.Sel.Name)
						}
					case "math/rand/v2":
						if !allowedRandV2[x.Sel.Name] && ast.IsExported(x.Sel.Name) && x.Sel.Name != "Rand" && x.Sel.Name != "Source" {
							t.Errorf("%s: rand.%s uses the global source: inject a *rand.Rand", fset.Position(x.Pos()), x.Sel.Name)
						}
					}
				}
				return true
			})
		}
	}
}
