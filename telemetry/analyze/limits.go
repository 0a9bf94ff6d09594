package analyze

import (
	"fmt"
	"math"

	"gonum.org/v1/plot/vg"
)

// Timeline limits. Inputs beyond them are refused with an error naming
// the limit, so that a hostile or broken trace (or flag) cannot make the
// renderer allocate without bound.
const (
	// MaxImageSide is the largest width or height of a PNG/SVG timeline,
	// in inches; MaxImageArea bounds width × height (square inches). At
	// the PNG's 96 dots per inch the largest image is 18.4 Mpx (74 MB of
	// RGBA while it is drawn).
	MaxImageSide = 100.0
	MaxImageArea = 2000.0
	// MaxImageRows is the most paths a PNG/SVG timeline draws (one row
	// each); MaxHTMLRows the most an HTML timeline draws.
	MaxImageRows = 256
	MaxHTMLRows  = 4096
	// MaxImageBars and MaxHTMLBars bound the chunk attempts drawn per
	// transfer (each a bar), and MaxHTMLTransfers the transfers one HTML
	// page holds.
	MaxImageBars     = 100_000
	MaxHTMLBars      = 500_000
	MaxHTMLTransfers = 100
)

// checkImageSize validates a timeline's size in inches (0 means
// automatic) and returns it in points, with the automatic sizes filled
// in for rows rows.
func checkImageSize(widthIn, heightIn float64, rows int) (vg.Length, vg.Length, error) {
	for _, d := range []struct {
		name string
		v    float64
	}{{"width", widthIn}, {"height", heightIn}} {
		if math.IsNaN(d.v) || math.IsInf(d.v, 0) || d.v < 0 || d.v > MaxImageSide {
			return 0, 0, fmt.Errorf("analyze: timeline %s %v inches: want 0 (automatic) or a number in (0, %g]", d.name, d.v, MaxImageSide)
		}
	}
	if rows > MaxImageRows {
		return 0, 0, fmt.Errorf("analyze: timeline of %d paths: a PNG/SVG draws at most %d (use the HTML timeline, up to %d, or narrow the input)", rows, MaxImageRows, MaxHTMLRows)
	}
	if widthIn == 0 {
		widthIn = 10
	}
	if heightIn == 0 {
		heightIn = math.Min(float64(1+rows), MaxImageSide)
	}
	if a := widthIn * heightIn; a > MaxImageArea {
		return 0, 0, fmt.Errorf("analyze: timeline of %g × %g inches (%g square inches): at most %g square inches (%.1f Mpx at 96 dpi)", widthIn, heightIn, a, MaxImageArea, MaxImageArea*96*96/1e6)
	}
	return vg.Length(widthIn) * vg.Inch, vg.Length(heightIn) * vg.Inch, nil
}
