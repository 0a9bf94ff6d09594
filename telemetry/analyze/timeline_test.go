package analyze

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTimeline(t *testing.T) {
	td, err := ReadFiles(input)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Analyze(td, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := rep.Transfers[0]
	var pngBuf, svgBuf bytes.Buffer
	if err := Timeline(&pngBuf, tr, "png", 0, 0); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(pngBuf.Bytes()))
	if err != nil {
		t.Fatalf("Timeline(png) is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 200 {
		t.Errorf("PNG is %v, want at least 500×200", b)
	}
	if err := Timeline(&svgBuf, tr, "svg", 0, 0); err != nil {
		t.Fatal(err)
	}
	svg := svgBuf.String()
	if !strings.Contains(svg, "<svg") || !strings.Contains(svg, "mlx5_1") {
		t.Errorf("SVG lacks <svg or the path labels")
	}
	// One filled bar per attempt, at least.
	if n := strings.Count(svg, "<path"); n < len(tr.Attempts) {
		t.Errorf("SVG has %d paths, want >= %d attempts", n, len(tr.Attempts))
	}
	if dir := os.Getenv("MPTX_TIMELINE_OUT"); dir != "" { // for eyeballing
		_ = os.WriteFile(filepath.Join(dir, "timeline.png"), pngBuf.Bytes(), 0o644)
		_ = os.WriteFile(filepath.Join(dir, "timeline.svg"), svgBuf.Bytes(), 0o644)
	}
	if err := Timeline(&bytes.Buffer{}, tr, "gif", 0, 0); err == nil || !strings.Contains(err.Error(), "png, svg") {
		t.Errorf("Timeline(gif) = %v, want an error listing png, svg", err)
	}
	if err := Timeline(&bytes.Buffer{}, &Transfer{ID: 3}, "png", 0, 0); err == nil {
		t.Errorf("Timeline(no attempts) = nil, want an error")
	}
}
