package experiments

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rewrite regenerates golden files. Review every diff before committing it:
// a changed run hash means resumed sweeps will re-run everything.
var rewrite = flag.Bool("rewrite", false, "rewrite golden files under testdata/")

// goldenSpec renders what Parse makes of a spec file: the error line for a
// bad spec; for a good one the resolved scenario (as hashed), the matrix,
// the seeds, the number of runs and the first run hashes.
func goldenSpec(path string) string {
	s, err := ParseFile(path)
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	var b bytes.Buffer
	scen, _ := json.MarshalIndent(s, "", "  ")
	fmt.Fprintf(&b, "scenario: %s\n", scen)
	mat, _ := json.Marshal(s.Matrix)
	fmt.Fprintf(&b, "matrix: %s\nseeds: %v\n", mat, s.Seeds)
	runs := Expand(s)
	fmt.Fprintf(&b, "runs: %d\n", len(runs))
	for _, r := range runs[:min(4, len(runs))] {
		fmt.Fprintf(&b, "run %d %s seed=%d %s [%s]\n", r.Index, r.Hash, r.Seed, r.Policy.Key(), r.Label())
	}
	return b.String()
}

func TestParseGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/specs/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no specs under testdata/specs: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			got := goldenSpec(f)
			golden := strings.TrimSuffix(f, ".yaml") + ".golden"
			if *rewrite {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -rewrite to create it)", err)
			}
			if got != string(want) {
				t.Errorf("ParseFile(%s) differs from %s (go test -rewrite updates it):\ngot:\n%s\nwant:\n%s", f, golden, got, want)
			}
			bad := strings.HasPrefix(filepath.Base(f), "bad-")
			if isErr := strings.HasPrefix(got, "error: "); isErr != bad {
				t.Errorf("ParseFile(%s): error = %v, want error only for bad-*.yaml", f, isErr)
			}
			if bad {
				// One line that names the file.
				if strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "error: "+f) {
					t.Errorf("error %q: want one line starting with the file name", got)
				}
			}
		})
	}
}
