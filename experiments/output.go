package experiments

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// WriteOutputs writes a sweep's reports under dir:
//
//	results.jsonl, results.csv      one row per run (every metric)
//	<scenario>/summary.md           the comparison table and plot links
//	<scenario>/*.png, *.svg         plots (when plots is true)
//
// It returns the scenario summaries. Output depends only on results (rows
// sorted by scenario, run index and seed), apart from the WallMs column.
func WriteOutputs(dir string, results []*Result, plots bool) ([]ScenarioSummary, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	SortResults(results)
	rows := Rows(results)
	var jb, cb bytes.Buffer
	if err := WriteJSONL(&jb, rows); err != nil {
		return nil, err
	}
	if err := WriteCSV(&cb, rows); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.jsonl"), jb.Bytes(), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.csv"), cb.Bytes(), 0o644); err != nil {
		return nil, err
	}
	sums := Summarise(results)
	for i := range sums {
		s := &sums[i]
		sd := filepath.Join(dir, s.Scenario)
		if err := os.MkdirAll(sd, 0o755); err != nil {
			return nil, err
		}
		var files []string
		if plots {
			var err error
			if files, err = WritePlots(sd, s, results); err != nil {
				return nil, err
			}
		}
		var md bytes.Buffer
		s.Markdown(&md, pngs(files))
		if err := os.WriteFile(filepath.Join(sd, "summary.md"), md.Bytes(), 0o644); err != nil {
			return nil, fmt.Errorf("summary of %s: %w", s.Scenario, err)
		}
	}
	return sums, nil
}

func pngs(files []string) []string {
	var out []string
	for _, f := range files {
		if filepath.Ext(f) == ".png" {
			out = append(out, f)
		}
	}
	return out
}
