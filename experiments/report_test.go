package experiments

import (
	"context"
	"flag"
	"image"
	"image/draw"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mptx-dev/mptx/internal/browsertest"
)

var (
	reportDir  = flag.String("report-dir", "", "TestReportInBrowser: load DIR/report.html (an existing results directory) instead of a fresh sweep")
	reportShot = flag.String("report-screenshot", "", "TestReportInBrowser: also copy the screenshot to this file (docs/report.png)")
)

// reportSweep is a small sweep with every part of a report: two swept
// parameters, two policies, two seeds, background flows.
const reportSweep = `name: report-sweep
description: A small incast sweep for the report test.
topology: {kind: star, hosts: 8}
switch: {buffer: 1MiB}
workloads:
  - {kind: incast, senders: "1-4", receiver: 0, size: 256KiB}
  - {kind: background, hosts: "5-7", cdf: websearch, load: 0.2, duration: 300us}
matrix: {cc: [dcqcn, swift]}
seeds: [1, 2]
stop: {time: 20ms}
sweep:
  switch.buffer: [512KiB, 1MiB]
  workloads[0].senders: {values: ["1-2", "1-4"], label: incast degree}
`

// TestReportInBrowser opens report.html in headless Chromium (Debian's
// chromium, internal/browsertest) from disk and checks what a reader
// sees: a sortable comparison table per scenario with a row per (sweep
// point, policy), every figure as inline SVG, the verdicts, per-run rows
// that a policy's link opens, the spec, and no console error. It saves a
// screenshot in the test's temporary directory (and, with
// -report-screenshot, where the flag says).
func TestReportInBrowser(t *testing.T) {
	dir := *reportDir
	wantScenarios, wantRows, wantFigs := 1, 8, 0
	if dir == "" {
		dir = t.TempDir()
		s, err := Parse(filepath.Join(dir, "report-sweep.yaml"), []byte(reportSweep), os.ReadFile)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Sweep(context.Background(), []*Spec{s}, SweepOptions{Out: dir, Workers: 2, Plots: true})
		if err != nil {
			t.Fatal(err)
		}
		figs, err := Figures(&rep.Summaries[0], rep.Report.Results)
		if err != nil {
			t.Fatal(err)
		}
		wantFigs = len(figs)
	}
	path := filepath.Join(dir, ReportFile)
	html, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"http://", "https://", "<link ", " src=\"http"} {
		if i := strings.Index(string(html), bad); i >= 0 && !strings.Contains(string(html[max(i-40, 0):i+40]), "www.w3.org") {
			t.Errorf("report.html refers to the network (%q near %q); it must be self-contained", bad, html[max(i-40, 0):min(i+60, len(html))])
		}
	}
	p := browsertest.Open(t, path, 1400, 900)
	if n := p.Count("section.scenario"); *reportDir == "" && n != wantScenarios {
		t.Errorf("%d scenario sections, want %d", n, wantScenarios)
	}
	if n := p.Count("table.results tbody tr"); *reportDir == "" && n != wantRows {
		t.Errorf("comparison table has %d rows, want %d (4 sweep points × 2 policies)", n, wantRows)
	}
	if n := p.Count("table.runs tbody tr"); *reportDir == "" && n != 2*wantRows {
		t.Errorf("per-run table has %d rows, want %d", n, 2*wantRows)
	}
	if n := p.Count("figure svg"); n == 0 || (wantFigs > 0 && n != wantFigs) {
		t.Errorf("%d inline SVG figures, want %d", n, wantFigs)
	}
	if n := p.Count("div.verdict"); n == 0 {
		t.Error("no verdicts")
	}
	if n := p.Count("table.verdicts tbody tr"); *reportDir == "" && n != 4 {
		t.Errorf("verdict table has %d rows, want one per sweep point (4)", n)
	}
	if n := p.Count("pre.spec"); n == 0 {
		t.Error("no spec")
	}
	var sweepFigs int
	p.Eval(`[...document.querySelectorAll("figure")].filter(f => f.id.includes("sweep-fct-p99")).length`, &sweepFigs)
	if sweepFigs == 0 {
		t.Error("no FCT p99 sweep figure")
	}
	shot := p.Screenshot("report.png")
	t.Logf("screenshot: %s", shot)
	if *reportShot != "" {
		if err := cropPNG(shot, *reportShot, 2000); err != nil {
			t.Fatal(err)
		}
	}
	// Sorting: click the FCT p99 heading twice (ascending, descending):
	// the first row's value must be the largest.
	var ok bool
	p.Eval(`(() => {
		const t = document.querySelector("table.results");
		const th = [...t.tHead.rows[0].cells].find(c => c.textContent.startsWith("FCT p99"));
		const col = th.cellIndex;
		th.click(); th.click();
		const vals = [...t.tBodies[0].rows].map(r => parseFloat(r.cells[col].dataset.sort)).filter(v => !isNaN(v));
		return th.getAttribute("aria-sort") === "descending" && vals.length > 1 && vals.every((v, i) => i == 0 || vals[i-1] >= v);
	})()`, &ok)
	if !ok {
		t.Error("sorting the comparison table by FCT p99 (descending) did not order its rows")
	}
	// A policy's link opens its per-run details.
	p.Eval(`(() => {
		const a = document.querySelector("table.results tbody a");
		a.click();
		return a.closest("section").querySelector("details.runs").open;
	})()`, &ok)
	if !ok {
		t.Error("a policy link did not open the per-run details")
	}
	if errs := p.Errors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
}

// cropPNG copies the top maxH pixels of a PNG.
func cropPNG(src, dst string, maxH int) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return err
	}
	b := img.Bounds()
	b.Max.Y = min(b.Max.Y, b.Min.Y+maxH)
	out := image.NewRGBA(b)
	draw.Draw(out, b, img, b.Min, draw.Src)
	w, err := os.Create(dst)
	if err != nil {
		return err
	}
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(w, out); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}
