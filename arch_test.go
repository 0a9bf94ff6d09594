package mptx_test

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/mptx-dev/mptx"

// corePackages are the deterministic, I/O-free state machines, with the
// module packages each may import (directly or not).
var corePackages = map[string][]string{
	"cc":        {"units", "vtime"},
	"pacing":    {"units", "vtime"},
	"chunk":     {"units", "vtime"},
	"multipath": {"units", "vtime", "cc", "pacing", "chunk"},
	"slab":      {"units"},
}

// coreStd is the standard library a core package may import: pure
// computation. Anything else (os, net, sync, runtime, unsafe, os/signal,
// net/http, log...) is I/O, locking, scheduling or global state, and is
// refused. sync/atomic is for the cc registry's seal.
var coreStd = map[string]bool{
	"cmp": true, "errors": true, "fmt": true, "hash/crc32": true, "iter": true, "maps": true,
	"math": true, "math/bits": true, "math/rand/v2": true, "slices": true, "sort": true,
	"strconv": true, "strings": true, "sync/atomic": true, "time": true, "unicode/utf8": true,
	"encoding/binary": true,
}

// coreThirdParty is the one outside module the core may use: the token
// bucket, in its explicit-time forms (pacing), and so multipath through
// pacing.
var coreThirdParty = map[string][]string{
	"pacing":    {"golang.org/x/time/rate"},
	"multipath": {"golang.org/x/time/rate"},
}

// coreGlobals are the package-level variables the core may have, each
// immutable after initialisation; any other package-level var (a counter,
// a cache, a default someone could change) is mutable state shared by
// every engine in a process and is refused. Blank assertions (var _ I =
// ...) and error sentinels (errors.New, fmt.Errorf) need no entry.
var coreGlobals = map[string]string{
	"cc.registry":              "written only by Register during init, sealed by the first New",
	"cc.sealed":                "the registry's seal",
	"cc.inf":                   "math.Inf(1), a constant Go cannot declare as const",
	"chunk.castagnoli":         "the read-only CRC-32C table",
	"multipath.policyNames":    "read-only name table",
	"cc.alphaUpdateNames":      "read-only enum name table",
	"cc.decreaseNames":         "read-only enum name table",
	"cc.clampNames":            "read-only enum name table",
	"cc.increaseNames":         "read-only enum name table",
	"multipath.pathStateNames": "read-only name table",
}

// TestArchitectureRule enforces the one architecture rule on the core
// packages (cc, pacing, chunk, multipath): no clock reads, no sleeping, no
// goroutines, no global randomness, no package-level mutable state, and
// imports (direct and transitive, from go list -deps) only from the pure
// part of the standard library, the leaves units and vtime, each other
// (multipath → cc, pacing, chunk) and golang.org/x/time/rate. Test files
// are exempt.
func TestArchitectureRule(t *testing.T) {
	// Functions of package time that read the clock or sleep.
	forbiddenTime := map[string]bool{
		"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
		"AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true,
	}
	// Package-level functions of math/rand/v2 use the global source.
	allowedRandV2 := map[string]bool{"New": true, "NewPCG": true, "NewChaCha8": true, "NewZipf": true, "Rand": true, "Source": true, "PCG": true}
	for pkg := range corePackages {
		checkDeps(t, pkg)
		files, err := filepath.Glob(filepath.Join(pkg, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("package %s: no files (%v)", pkg, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
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
			}
			checkGlobals(t, fset, file, pkg)
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
						if !allowedRandV2[x.Sel.Name] && ast.IsExported(x.Sel.Name) {
							t.Errorf("%s: rand.%s uses the global source: inject a *rand.Rand", fset.Position(x.Pos()), x.Sel.Name)
						}
					}
				}
				return true
			})
		}
	}
}

// checkDeps checks pkg's import graph with go list -deps: every standard
// package in coreStd (or imported only through an allowed third-party
// package), every module package allowed.
func checkDeps(t *testing.T, pkg string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}} {{join .Imports \",\"}}", "./"+pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps ./%s: %v", pkg, err)
	}
	allowed := map[string]bool{module + "/" + pkg: true}
	for _, m := range corePackages[pkg] {
		allowed[module+"/"+m] = true
	}
	third := map[string]bool{}
	for _, p := range coreThirdParty[pkg] {
		third[p] = true
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	// importers[p] = packages (in the graph) importing p.
	importers := map[string][]string{}
	std := map[string]bool{}
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		std[f[0]] = f[1] == "true"
		if len(f) == 3 {
			for _, imp := range strings.Split(f[2], ",") {
				importers[imp] = append(importers[imp], f[0])
			}
		}
	}
	for p, isStd := range std {
		switch {
		case allowed[p] || third[p]:
		case !isStd && strings.HasPrefix(p, module):
			t.Errorf("core package %s depends on %s (allowed module packages: %v); imported by %v", pkg, p, corePackages[pkg], importers[p])
		case !isStd:
			if !slices.ContainsFunc(importers[p], func(q string) bool { return !allowed[q] }) {
				t.Errorf("core package %s depends on %s (allowed outside the module: %v)", pkg, p, coreThirdParty[pkg])
			}
		default:
			// A standard package: allowed if listed, or if only the
			// standard library or an allowed third-party package brings
			// it in (x/time/rate uses sync; fmt uses os).
			if coreStd[p] {
				break
			}
			for _, q := range importers[p] {
				if allowed[q] {
					t.Errorf("%s imports %q: core packages use only pure standard packages (%v)", q, p, keys(coreStd))
				}
			}
		}
	}
}

func keys(m map[string]bool) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	slices.Sort(k)
	return k
}

// checkGlobals refuses package-level variables that are not blank
// assertions, error sentinels, or listed in coreGlobals.
func checkGlobals(t *testing.T, fset *token.FileSet, file *ast.File, pkg string) {
	t.Helper()
	for _, d := range file.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if n.Name == "_" {
					continue
				}
				if i < len(vs.Values) && isErrorSentinel(vs.Values[i]) {
					continue
				}
				if _, ok := coreGlobals[pkg+"."+n.Name]; ok {
					continue
				}
				t.Errorf("%s: package-level var %s.%s: core packages hold no mutable state shared by all engines (make it a field, a const, or list it in coreGlobals with why it is immutable)", fset.Position(n.Pos()), pkg, n.Name)
			}
		}
	}
}

func isErrorSentinel(e ast.Expr) bool {
	c, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	s, ok := c.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := s.X.(*ast.Ident)
	return ok && ((id.Name == "errors" && s.Sel.Name == "New") || (id.Name == "fmt" && s.Sel.Name == "Errorf"))
}

// TestImportDirection checks that imports point one way across the whole
// module: nothing imports cmd/ or experiments/ (outside themselves), the
// backends (qp/...) and the simulator never import the driver, sessions
// or telemetry, and telemetry never imports the simulator's runner.
func TestImportDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \",\"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	rel := func(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, module), "/") }
	under := func(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	rules := []struct {
		from, to string
		why      string
	}{
		{"", "cmd", "cmd/ is thin and imported by nothing"},
		{"", "experiments", "only cmd/ and experiments/ itself import experiments/"},
		{"qp", "", "backends implement qp and import no driver, engine, session or telemetry"},
		{"sim", "experiments", "the simulator does not know the experiment runner"},
		{"multipath", "qp", "the engine is I/O-free"},
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		from := rel(f[0])
		for _, imp := range strings.Split(f[1], ",") {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			to := rel(imp)
			for _, r := range rules {
				switch {
				case r.to == "cmd" && under(to, "cmd") && !under(from, "cmd"):
				case r.to == "experiments" && r.from == "" && under(to, "experiments") && !under(from, "experiments") && !under(from, "cmd"):
				case r.from == "qp" && under(from, "qp") && !under(to, "qp") && to != "units" && to != "vtime" && to != "chunk" && !under(to, "internal"):
				case r.from == "sim" && under(from, "sim") && under(to, r.to):
				case r.from == "multipath" && under(from, "multipath") && from != "multipath/enginetest" && under(to, r.to):
				default:
					continue
				}
				t.Errorf("%s imports %s: %s", f[0], imp, r.why)
			}
		}
	}
}
