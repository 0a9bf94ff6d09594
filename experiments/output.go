package experiments

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// WriteOutputs writes a sweep's reports under dir:
//
//	results.jsonl, results.csv      one row per run (every metric, a column per swept parameter)
//	report.html                     the whole sweep on one self-contained page
//	<scenario>/summary.md           the comparison table, verdicts and plot links
//	<scenario>/*.png, *.svg         figures (when plots is true)
//
// It returns the scenario summaries. Output depends only on results (rows
// sorted by scenario, run index and seed) and on dir/specs/<scenario>.yaml
// (the specs, shown in the report), apart from the WallMs column.
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
	var scens []ReportScenario
	for i := range sums {
		s := &sums[i]
		sd := filepath.Join(dir, s.Scenario) // a valid name: no separators
		if err := os.MkdirAll(sd, 0o755); err != nil {
			return nil, err
		}
		var figs []Figure
		var files []string
		if plots {
			var err error
			if figs, err = Figures(s, results); err != nil {
				return nil, err
			}
			if files, err = SaveFigures(sd, figs); err != nil {
				return nil, err
			}
		}
		var md bytes.Buffer
		s.Markdown(&md, pngs(files))
		if err := os.WriteFile(filepath.Join(sd, "summary.md"), md.Bytes(), 0o644); err != nil {
			return nil, fmt.Errorf("summary of %s: %w", s.Scenario, err)
		}
		spec, _ := readLimited(specPath(dir, s.Scenario), MaxSpecBytes)
		var mine []*Result
		for _, r := range results {
			if r.Row.Scenario == s.Scenario {
				mine = append(mine, r)
			}
		}
		scens = append(scens, ReportScenario{Summary: s, Figures: figs, Spec: string(spec), Results: mine})
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	if _, err := WriteReport(dir, filepath.Base(abs), scens); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return sums, nil
}

// specPath is where a sweep keeps a scenario's spec source.
func specPath(dir, scenario string) string {
	return filepath.Join(dir, "specs", scenario+".yaml")
}

// SaveSpecs writes each spec's source to dir/specs/<name>.yaml, for the
// report.
func SaveSpecs(dir string, specs []*Spec) error {
	for _, s := range specs {
		if len(s.Source()) == 0 {
			continue
		}
		if err := os.MkdirAll(filepath.Join(dir, "specs"), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(specPath(dir, s.Name), s.Source(), 0o644); err != nil {
			return err
		}
	}
	return nil
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
