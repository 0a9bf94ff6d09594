package experiments

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the spec parser. It must never panic;
// a rejected spec must fail with one *SpecError line that starts with the
// file name; an accepted spec must expand to runs whose hashes are stable
// across a second parse.
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
	})
}
