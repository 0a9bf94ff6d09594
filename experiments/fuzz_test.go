package experiments

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the spec parser. It must never panic;
// a rejected spec must fail with one *SpecError line that starts with the
// file name; an accepted spec (sweeps included) must expand to runs whose
// hashes are distinct and stable across a second parse.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/specs/*")
	refs := map[string][]byte{}
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		refs[filepath.Base(p)] = data
		if strings.HasSuffix(p, ".yaml") {
			f.Add(data)
		}
	}
	// Hostile shapes: nesting past MaxDepth in each style.
	f.Add([]byte("name: x\nworkloads: " + strings.Repeat("[", 200) + strings.Repeat("]", 200)))
	f.Add([]byte("name: x\nworkloads:\n" + strings.Repeat("- ", 200) + "a\n"))
	suites, _ := filepath.Glob("suites/*/*.yaml")
	for _, p := range suites {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	read := func(name string) ([]byte, error) {
		if d, ok := refs[filepath.Base(name)]; ok {
			return d, nil
		}
		return nil, os.ErrNotExist
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("fuzz.yaml", data, read)
		if err != nil {
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("Parse error %T is not a *SpecError: %v", err, err)
			}
			msg := err.Error()
			if strings.ContainsAny(msg, "\n\r") || !strings.HasPrefix(msg, "fuzz.yaml") {
				t.Fatalf("Parse error is not one line starting with the file name: %q", msg)
			}
			return
		}
		runs := Expand(s)
		if len(runs) == 0 || len(runs) > MaxRuns {
			t.Fatalf("Expand gave %d runs", len(runs))
		}
		again, err := Parse("fuzz.yaml", data, read)
		if err != nil {
			t.Fatalf("second Parse failed: %v", err)
		}
		if h := Expand(again)[0].Hash; h != runs[0].Hash {
			t.Fatalf("run hash changed between parses: %s vs %s", runs[0].Hash, h)
		}
		// Every run of a sweep × matrix × seeds is a different run.
		seen := map[string]bool{}
		for _, r := range runs {
			if seen[r.Hash] {
				t.Fatalf("two runs share hash %s (%s at %v)", r.Hash, r.Policy.Key(), r.Spec.Params)
			}
			seen[r.Hash] = true
		}
	})
}

// FuzzLoadResult feeds arbitrary bytes to what exp merge / plot / report
// do with a run result file: DecodeResult must reject anything that could
// not have come from a run with one short error, never panic; an accepted
// result must have a safe scenario name and hash (a scenario or hash of
// "../x" once made merge write outside --out; TestHostileResultFiles
// checks the directories) and must summarise and render its tables and
// report without panicking. Figures are left to TestFiguresOddSeries:
// drawing under the fuzzer's coverage instrumentation takes seconds per
// input.
func FuzzLoadResult(f *testing.F) {
	files, _ := filepath.Glob("testdata/results/*.json")
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := DecodeResult(data)
		if err != nil {
			if msg := err.Error(); len(msg) > 1024 || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("DecodeResult error is not one short line (%d bytes)", len(msg))
			}
			return
		}
		if !ValidName(res.Row.Scenario) || !hashRE.MatchString(res.Row.Hash) {
			t.Fatalf("DecodeResult accepted scenario %q hash %q", res.Row.Scenario, res.Row.Hash)
		}
		sums := Summarise([]*Result{res})
		var b bytes.Buffer
		sums[0].Markdown(&b, nil)
		if err := WriteJSONL(&b, Rows([]*Result{res})); err != nil {
			t.Fatal(err)
		}
		if err := WriteCSV(&b, Rows([]*Result{res})); err != nil {
			t.Fatal(err)
		}
		if err := renderReport(&b, "fuzz", []ReportScenario{{Summary: &sums[0], Results: []*Result{res}}}); err != nil {
			t.Fatal(err)
		}
	})
}
