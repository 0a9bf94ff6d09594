package experiments

import (
	"bufio"
	"embed"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The flow-size CDFs shipped with mptx; experiments/workloads/README.md
// names their sources.
//
//go:embed workloads/*.cdf
var cdfFS embed.FS

// BuiltinCDFs are the names a spec may use for cdf without a file.
var BuiltinCDFs = []string{"hadoop", "websearch"}

// CDFPoint is one point of an empirical flow-size CDF: Percent of flows are
// at most Bytes.
type CDFPoint struct {
	Bytes   float64 `json:"b"`
	Percent float64 `json:"p"`
}

// BuiltinCDF returns the shipped CDF called name.
func BuiltinCDF(name string) ([]CDFPoint, bool) {
	if !slices.Contains(BuiltinCDFs, name) {
		return nil, false
	}
	f, err := cdfFS.Open("workloads/" + name + ".cdf")
	if err != nil {
		panic("experiments: BUG: missing embedded CDF " + name)
	}
	defer f.Close()
	pts, err := ParseCDF(f, name)
	if err != nil {
		panic("experiments: BUG: embedded CDF " + name + ": " + err.Error())
	}
	return pts, true
}

// ParseCDF reads "size_bytes cumulative_percent" lines ('#' comments
// allowed). The first percentile must be 0 and the last 100, and sizes and
// percentiles must both increase strictly (HPCC traffic_gen/custom_rand.py,
// testCdf).
func ParseCDF(r io.Reader, file string) ([]CDFPoint, error) {
	s := bufio.NewScanner(r)
	var pts []CDFPoint
	line := 0
	for s.Scan() {
		line++
		t := strings.TrimSpace(s.Text())
		if i := strings.IndexByte(t, '#'); i >= 0 {
			t = strings.TrimSpace(t[:i])
		}
		if t == "" {
			continue
		}
		f := strings.Fields(t)
		if len(f) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"size_bytes cumulative_percent\", got %d fields", file, line, len(f))
		}
		b, err1 := strconv.ParseFloat(f[0], 64)
		p, err2 := strconv.ParseFloat(f[1], 64)
		if err1 != nil || err2 != nil || !(b >= 0 && b < 1e15) || !(p >= 0 && p <= 100) {
			return nil, fmt.Errorf("%s:%d: want a size in bytes >= 0 and a percentile in [0, 100], got %q", file, line, t)
		}
		if n := len(pts); n > 0 && (b <= pts[n-1].Bytes || p <= pts[n-1].Percent) {
			return nil, fmt.Errorf("%s:%d: sizes and percentiles must both increase strictly", file, line)
		}
		if len(pts) == 0 && p != 0 {
			return nil, fmt.Errorf("%s:%d: the first point's percentile must be 0, got %v", file, line, p)
		}
		pts = append(pts, CDFPoint{b, p})
		if len(pts) > 10000 {
			return nil, fmt.Errorf("%s:%d: more than 10000 points", file, line)
		}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(pts) < 2 || pts[len(pts)-1].Percent != 100 {
		return nil, fmt.Errorf("%s: want at least two points ending at percentile 100", file)
	}
	return pts, nil
}

// cdfMean is the mean of the piecewise-linear distribution (the trapezoid
// sum, HPCC custom_rand.py getAvg).
func cdfMean(pts []CDFPoint) float64 {
	var s float64
	for i := 1; i < len(pts); i++ {
		s += (pts[i].Bytes + pts[i-1].Bytes) / 2 * (pts[i].Percent - pts[i-1].Percent)
	}
	return s / 100
}

// cdfQuantile returns the size at cumulative fraction u in [0, 1],
// interpolating linearly (custom_rand.py getValueFromPercentile).
func cdfQuantile(pts []CDFPoint, u float64) float64 {
	y := u * 100
	for i := 1; i < len(pts); i++ {
		if y <= pts[i].Percent {
			a, b := pts[i-1], pts[i]
			return a.Bytes + (b.Bytes-a.Bytes)/(b.Percent-a.Percent)*(y-a.Percent)
		}
	}
	return pts[len(pts)-1].Bytes
}

// sizeOf rounds a sampled size to whole bytes, at least 1.
func sizeOf(x float64) Size {
	if x < 1 || math.IsNaN(x) {
		return 1
	}
	return Size(math.Round(x))
}
