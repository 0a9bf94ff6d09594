package browsertest_test

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mptx-dev/mptx/internal/browsertest"
)

func write(t *testing.T, name, html string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCleanPage loads a page with no errors: the count, the evaluation and
// the screenshot work, and Errors is empty.
func TestCleanPage(t *testing.T) {
	p := browsertest.Open(t, write(t, "clean.html", `<!doctype html><meta charset="utf-8"><title>ok</title>
<table><tr><td>1</td></tr><tr><td>2</td></tr></table>
<svg width="100" height="50"><rect width="100" height="50" fill="#0072b2"/></svg>
<script>document.title = "ran " + (6*7)</script>`), 400, 300)
	if n := p.Count("td"); n != 2 {
		t.Errorf(`Count("td") = %d, want 2`, n)
	}
	if n := p.Count("svg rect"); n != 1 {
		t.Errorf(`Count("svg rect") = %d, want 1`, n)
	}
	var title string
	p.Eval("document.title", &title)
	if title != "ran 42" {
		t.Errorf("document.title = %q, want %q (scripts must run from file://)", title, "ran 42")
	}
	if errs := p.Errors(); len(errs) != 0 {
		t.Errorf("Errors() = %q, want none", errs)
	}
	shot := p.Screenshot("clean.png")
	data, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("screenshot %s is not a PNG: %v", shot, err)
	}
	if b := img.Bounds(); b.Dx() != 400 || b.Dy() < 150 {
		t.Errorf("screenshot is %v, want the viewport's 400 pixels wide and the page (>= 150) high", b)
	}
}

// TestErrorsReported checks that each kind of console error reaches Errors:
// console.error, an uncaught exception and a resource that fails to load.
func TestErrorsReported(t *testing.T) {
	p := browsertest.Open(t, write(t, "bad.html", `<!doctype html><meta charset="utf-8"><title>bad</title>
<img src="missing-image.png">
<script>console.error("boom one");</script>
<script>throw new Error("boom two");</script>`), 0, 0)
	errs := strings.Join(p.Errors(), "\n")
	for _, want := range []string{"boom one", "boom two", "missing-image.png"} {
		if !strings.Contains(errs, want) {
			t.Errorf("Errors() = %q, want one mentioning %q", errs, want)
		}
	}
}
