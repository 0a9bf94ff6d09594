package experiments

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ReportFile is the name of a results directory's HTML report.
const ReportFile = "report.html"

// ReportScenario is one scenario's part of the report.
type ReportScenario struct {
	Summary *ScenarioSummary
	Figures []Figure
	// Spec is the scenario's spec source ("" when unknown).
	Spec string
	// Results are the scenario's runs.
	Results []*Result
}

// WriteReport writes dir/report.html: one self-contained page (inline
// CSS, JavaScript and SVG; no network access) that opens from disk in any
// browser, with, per scenario: the description, how the table was
// computed, the objective's verdicts, a sortable table of every (sweep
// point, policy) with means and 95% intervals, the figures, the per-run
// rows (each linked to its runs/<hash>.json) and the spec. title names the
// sweep.
func WriteReport(dir, title string, scens []ReportScenario) (string, error) {
	var b bytes.Buffer
	if err := renderReport(&b, title, scens); err != nil {
		return "", err
	}
	p := filepath.Join(dir, ReportFile)
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		return "", err
	}
	return p, nil
}

// reportCell is a table cell: the text and the number it sorts by.
type reportCell struct {
	Text  string
	Sort  string // a number for numeric columns, "" to sort by text
	Title string // tooltip: the interval
	Link  string
}

type reportRow struct {
	ID    string
	Cells []reportCell
	Best  bool
}

type reportTable struct {
	ID      string
	Class   string
	Head    []string
	Numeric []bool
	Rows    []reportRow
}

type reportFig struct {
	ID, Title, Caption string
	SVG                template.HTML
	PNG                string
}

type reportScen struct {
	ID, Name, Description, Method string
	Objective                     string
	Verdicts                      []template.HTML
	VerdictTable                  *reportTable
	Table, Runs                   reportTable
	Figures                       []reportFig
	Spec                          string
	RunCount                      int
}

func renderReport(w *bytes.Buffer, title string, scens []ReportScenario) error {
	var data struct {
		Title, Version string
		Runs           int
		Scenarios      []reportScen
	}
	data.Title, data.Version = title, Version()
	for _, sc := range scens {
		s := sc.Summary
		id := "s-" + s.Scenario
		rs := reportScen{ID: id, Name: s.Scenario, Description: strings.TrimSpace(s.Description), Method: s.Method(), Spec: sc.Spec, RunCount: len(sc.Results)}
		data.Runs += len(sc.Results)
		rs.Objective = "Objective: " + s.Objective.Describe() + "."
		if len(s.Params) == 0 {
			for _, l := range s.VerdictLines() {
				rs.Verdicts = append(rs.Verdicts, boldHTML(strings.TrimPrefix(l, rs.Objective+" ")))
			}
		} else {
			rs.VerdictTable = verdictTable(id, s)
		}
		rs.Table = summaryTable(id, s)
		rs.Runs = runsTable(id, s, sc.Results)
		for _, f := range sc.Figures {
			rs.Figures = append(rs.Figures, reportFig{ID: id + "-" + f.Name, Title: f.Title, Caption: f.Caption, SVG: inlineSVG(f.SVG), PNG: s.Scenario + "/" + f.Name + ".png"})
		}
		data.Scenarios = append(data.Scenarios, rs)
	}
	return reportTmpl.Execute(w, data)
}

// boldHTML escapes a verdict line and turns its **bold** marks into <b>.
func boldHTML(s string) template.HTML {
	parts := strings.Split(s, "**")
	var b strings.Builder
	for i, p := range parts {
		if i%2 == 1 {
			b.WriteString("<b>" + template.HTMLEscapeString(p) + "</b>")
		} else {
			b.WriteString(template.HTMLEscapeString(p))
		}
	}
	return template.HTML(b.String())
}

// inlineSVG strips the XML prolog of a gonum SVG so it can sit in the page.
// The SVG is our own rendering, and every text in it was escaped by the
// SVG writer.
func inlineSVG(svg []byte) template.HTML {
	i := bytes.Index(svg, []byte("<svg"))
	if i < 0 {
		return ""
	}
	return template.HTML(svg[i:])
}

func sortNum(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return ""
	}
	return strconv.FormatFloat(x, 'g', 10, 64)
}

func summaryTable(id string, s *ScenarioSummary) reportTable {
	t := reportTable{ID: id + "-table", Class: "results"}
	ms := s.TableMetrics()
	for _, p := range s.Params {
		t.Head = append(t.Head, p.Label)
		t.Numeric = append(t.Numeric, p.Kind != ParamText)
	}
	t.Head = append(t.Head, "policy", "done")
	t.Numeric = append(t.Numeric, false, true)
	for _, m := range ms {
		t.Head = append(t.Head, m.Head)
		t.Numeric = append(t.Numeric, true)
	}
	best := map[string]bool{}
	for _, pt := range s.Points() {
		if v := s.Judge(pt); v.Best != nil {
			best[v.Best.Point()+"\x00"+v.Best.Policy] = true
		}
	}
	for i := range s.Policies {
		p := &s.Policies[i]
		row := reportRow{ID: fmt.Sprintf("%s-p%d", id, i), Best: best[p.Point()+"\x00"+p.Policy]}
		for _, x := range p.Params {
			row.Cells = append(row.Cells, reportCell{Text: x.Display(), Sort: sortNum(x.X)})
		}
		row.Cells = append(row.Cells,
			reportCell{Text: p.Policy, Link: fmt.Sprintf("#%s-p%d-runs", id, i)},
			reportCell{Text: fmt.Sprintf("%d/%d", p.Completed, p.Flows), Sort: sortNum(float64(p.Completed) / math.Max(float64(p.Flows), 1))})
		for _, m := range ms {
			st := p.Stat(m.Col)
			c := reportCell{Text: Cell(st, m.Scale), Sort: sortNum(st.Mean / m.Scale)}
			if st.N >= 2 {
				c.Title = fmt.Sprintf("95%% interval [%s, %s] over %d seeds", num(st.Lo/m.Scale), num(st.Hi/m.Scale), st.N)
			}
			row.Cells = append(row.Cells, c)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// verdictTable shows a sweep's verdicts: one row per point with the best
// policy, the runner-up and whether noise separates them.
func verdictTable(id string, s *ScenarioSummary) *reportTable {
	t := &reportTable{ID: id + "-verdicts", Class: "verdicts"}
	for _, p := range s.Params {
		t.Head = append(t.Head, p.Label)
		t.Numeric = append(t.Numeric, p.Kind != ParamText)
	}
	m, _ := MetricByCol(s.Objective.Metric)
	scale := max(m.Scale, 1)
	t.Head = append(t.Head, "best", m.Head, "runner-up", m.Head+" ", "difference", "excluded")
	t.Numeric = append(t.Numeric, false, true, false, true, false, false)
	for _, pt := range s.Points() {
		v := s.Judge(pt)
		var r reportRow
		for _, x := range pt[0].Params {
			r.Cells = append(r.Cells, reportCell{Text: x.Display(), Sort: sortNum(x.X)})
		}
		add := func(p *PolicySummary) {
			if p == nil {
				r.Cells = append(r.Cells, reportCell{Text: "–"}, reportCell{Text: "–"})
				return
			}
			st := p.Stat(s.Objective.Metric)
			r.Cells = append(r.Cells, reportCell{Text: p.Policy}, reportCell{Text: Cell(st, scale), Sort: sortNum(st.Mean / scale)})
		}
		add(v.Best)
		add(v.RunnerUp)
		diff := "–"
		switch {
		case v.RunnerUp == nil:
		case !v.Known:
			diff = "one seed: cannot tell"
		case v.WithinNoise:
			diff = "within noise"
		case math.Abs(v.RunnerUp.Stat(s.Objective.Metric).Mean-v.Best.Stat(s.Objective.Metric).Mean) <= 0.001*math.Abs(v.Best.Stat(s.Objective.Metric).Mean):
			diff = "beyond noise, under 0.1%"
		default:
			diff = "beyond noise"
		}
		r.Cells = append(r.Cells, reportCell{Text: diff})
		var ex []string
		for _, e := range v.Excluded {
			ex = append(ex, e.Policy+" ("+e.Detail+")")
		}
		r.Cells = append(r.Cells, reportCell{Text: strings.Join(ex, ", ")})
		r.Best = v.Best != nil && v.WithinNoise == false && v.Known
		t.Rows = append(t.Rows, r)
	}
	return t
}

// runsTable lists every run: its point, policy, seed, hash (linked to its
// file) and its row's metrics.
func runsTable(id string, s *ScenarioSummary, results []*Result) reportTable {
	t := reportTable{ID: id + "-runs", Class: "runs"}
	for _, p := range s.Params {
		t.Head = append(t.Head, p.Label)
		t.Numeric = append(t.Numeric, p.Kind != ParamText)
	}
	t.Head = append(t.Head, "policy", "seed", "run", "done")
	t.Numeric = append(t.Numeric, false, true, false, true)
	ms := s.TableMetrics()
	for _, m := range ms {
		t.Head = append(t.Head, m.Head)
		t.Numeric = append(t.Numeric, true)
	}
	index := map[string]int{}
	for i := range s.Policies {
		index[s.Policies[i].Point()+"\x00"+s.Policies[i].Policy] = i
	}
	seen := map[int]bool{}
	for _, r := range results {
		row := &r.Row
		pi := index[paramsKey(row.Params)+"\x00"+row.Policy]
		rr := reportRow{}
		if !seen[pi] {
			rr.ID = fmt.Sprintf("%s-p%d-runs", id, pi)
			seen[pi] = true
		}
		for _, x := range row.Params {
			rr.Cells = append(rr.Cells, reportCell{Text: x.Display(), Sort: sortNum(x.X)})
		}
		rr.Cells = append(rr.Cells,
			reportCell{Text: row.Policy},
			reportCell{Text: strconv.FormatInt(row.Seed, 10), Sort: strconv.FormatInt(row.Seed, 10)},
			reportCell{Text: row.Hash, Link: "runs/" + row.Hash + ".json"},
			reportCell{Text: fmt.Sprintf("%d/%d", row.Completed, row.Flows), Sort: sortNum(float64(row.Completed) / math.Max(float64(row.Flows), 1))})
		for _, m := range ms {
			v := m.get(row) / m.Scale
			txt := num(v)
			if (m.FCT && row.Completed == 0) || (m.Bg && row.BgCompleted == 0) {
				txt, v = "–", math.NaN()
			}
			rr.Cells = append(rr.Cells, reportCell{Text: txt, Sort: sortNum(v)})
		}
		t.Rows = append(t.Rows, rr)
	}
	return t
}

var reportTmpl = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} — mptx experiment report</title>
<style>
:root { --fg: #1d2129; --muted: #5b6472; --line: #d9dde3; --accent: #1965b0; --best: #e8f1fb; --bg: #ffffff; --panel: #f6f7f9; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 "Liberation Sans", "Helvetica Neue", Arial, sans-serif; color: var(--fg); background: var(--bg); }
header.top { padding: 22px 40px 14px; border-bottom: 1px solid var(--line); background: var(--panel); }
header.top h1 { margin: 0 0 4px; font-size: 24px; font-weight: 600; }
header.top p { margin: 0; color: var(--muted); }
nav.toc { margin-top: 10px; display: flex; flex-wrap: wrap; gap: 6px 18px; }
nav.toc a { color: var(--accent); text-decoration: none; font-weight: 600; }
main { padding: 8px 40px 60px; max-width: 1400px; }
section.scenario { margin-top: 28px; padding-top: 8px; border-top: 2px solid var(--fg); }
section.scenario h2 { font-size: 21px; margin: 6px 0 4px; }
section.scenario h3 { font-size: 16px; margin: 22px 0 8px; }
p.desc { margin: 4px 0 8px; max-width: 80ch; }
p.method { color: var(--muted); font-size: 13px; max-width: 110ch; margin: 4px 0; }
div.verdict { margin: 12px 0; padding: 10px 16px; background: var(--best); border-left: 4px solid var(--accent); }
p.objective { margin: 0 0 6px; font-weight: 600; }
ul.verdicts { margin: 0; padding-left: 18px; }
ul.verdicts li { margin: 3px 0; }
div.tablewrap.short { max-width: 1100px; background: #fff; }
div.tablewrap.short tr.best td { background: #fff; font-weight: normal; }
.tablewrap { overflow-x: auto; border: 1px solid var(--line); border-radius: 4px; }
table { border-collapse: collapse; font-size: 13px; font-variant-numeric: tabular-nums; width: 100%; }
th, td { padding: 5px 10px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th { background: var(--panel); font-weight: 600; cursor: pointer; user-select: none; position: sticky; top: 0; }
th.text, td.text { text-align: left; }
th[aria-sort="ascending"]::after { content: " ▲"; color: var(--accent); }
th[aria-sort="descending"]::after { content: " ▼"; color: var(--accent); }
tr.best td { background: var(--best); font-weight: 600; }
tr:target td { outline: 2px solid var(--accent); }
td a { color: var(--accent); text-decoration: none; }
.figs { display: grid; grid-template-columns: repeat(auto-fill, minmax(620px, 1fr)); gap: 18px; }
figure { margin: 0; padding: 10px; border: 1px solid var(--line); border-radius: 4px; background: #fff; }
figure svg { width: 100%; height: auto; display: block; }
figcaption { font-size: 12.5px; color: var(--muted); margin-top: 6px; }
figcaption a { color: var(--accent); }
details { margin: 12px 0; }
details > summary { cursor: pointer; font-weight: 600; color: var(--accent); }
pre.spec { background: var(--panel); border: 1px solid var(--line); padding: 12px; overflow-x: auto; font-size: 12.5px; }
footer { color: var(--muted); font-size: 12px; padding: 0 40px 30px; }
</style>
</head>
<body>
<header class="top">
<h1>{{.Title}}</h1>
<p>{{.Runs}} runs in {{len .Scenarios}} scenario(s) · model {{.Version}} · every number is a mean over seeds ± the half width of its 95% Student-t interval</p>
<nav class="toc">{{range .Scenarios}}<a href="#{{.ID}}">{{.Name}}</a>{{end}}</nav>
</header>
<main>
{{range .Scenarios}}
<section class="scenario" id="{{.ID}}">
<h2>{{.Name}}</h2>
{{if .Description}}<p class="desc">{{.Description}}</p>{{end}}
<p class="method">{{.Method}}</p>
<div class="verdict"><p class="objective">{{.Objective}}</p>
{{if .Verdicts}}<ul class="verdicts">{{range .Verdicts}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{with .VerdictTable}}<div class="tablewrap short">{{template "table" .}}</div>{{end}}</div>
{{if .Figures}}<h3>Figures</h3>
<div class="figs">{{range .Figures}}
<figure id="{{.ID}}">{{.SVG}}<figcaption><b>{{.Title}}.</b> {{.Caption}} <a href="{{.PNG}}">PNG</a></figcaption></figure>{{end}}
</div>{{end}}
<h3>Comparison</h3>
<div class="tablewrap">{{template "table" .Table}}</div>
<details class="runs" id="{{.ID}}-details"><summary>Per-run results ({{.RunCount}} runs)</summary>
<div class="tablewrap">{{template "table" .Runs}}</div>
</details>
{{if .Spec}}<details class="spec"><summary>Spec</summary><pre class="spec">{{.Spec}}</pre></details>{{end}}
</section>
{{end}}
</main>
<footer>Written by <code>mptx exp</code>; the rows are in results.csv and results.jsonl beside this page, each run in runs/&lt;hash&gt;.json.</footer>
<script>
"use strict";
// Sortable tables: click a heading to sort by it; numbers sort by value.
document.querySelectorAll("table.sortable").forEach(function (table) {
  var heads = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function (th, col) {
    th.addEventListener("click", function () {
      var asc = th.getAttribute("aria-sort") !== "ascending";
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", asc ? "ascending" : "descending");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var numeric = th.dataset.numeric === "1";
      rows.sort(function (a, b) {
        var x = a.cells[col], y = b.cells[col];
        var r;
        if (numeric) {
          var p = parseFloat(x.dataset.sort), q = parseFloat(y.dataset.sort);
          if (isNaN(p)) p = asc ? Infinity : -Infinity;
          if (isNaN(q)) q = asc ? Infinity : -Infinity;
          r = p - q;
        } else {
          r = x.textContent.localeCompare(y.textContent);
        }
        return asc ? r : -r;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
// A link to a run row opens its details first.
function openTarget() {
  var id = decodeURIComponent(location.hash.slice(1));
  var el = id && document.getElementById(id);
  if (!el) return;
  var d = el.closest("details");
  if (d) d.open = true;
  el.scrollIntoView();
}
window.addEventListener("hashchange", openTarget);
openTarget();
</script>
</body>
</html>
{{define "table"}}<table class="sortable {{.Class}}" id="{{.ID}}">
<thead><tr>{{range $i, $h := .Head}}<th data-numeric="{{if index $.Numeric $i}}1{{else}}0{{end}}"{{if not (index $.Numeric $i)}} class="text"{{end}}>{{$h}}</th>{{end}}</tr></thead>
<tbody>{{range .Rows}}<tr{{if .ID}} id="{{.ID}}"{{end}}{{if .Best}} class="best"{{end}}>{{range $i, $c := .Cells}}<td{{if $c.Sort}} data-sort="{{$c.Sort}}"{{end}}{{if $c.Title}} title="{{$c.Title}}"{{end}}{{if not $c.Sort}} class="text"{{end}}>{{if $c.Link}}<a href="{{$c.Link}}">{{$c.Text}}</a>{{else}}{{$c.Text}}{{end}}</td>{{end}}</tr>
{{end}}</tbody></table>{{end}}
`))
