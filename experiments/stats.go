package experiments

import "math"

// Stat is one metric over a policy's seeds: the mean of the per-seed
// values and its 95% confidence interval, from Student's t distribution
// with n−1 degrees of freedom (mean ± t(0.975, n−1)·s/√n, s the sample
// standard deviation). The interval assumes the per-seed values are
// independent draws; with fewer than two seeds it is just the value
// (Lo = Hi = Mean) and says nothing about noise.
type Stat struct {
	Mean   float64   `json:"mean"`
	Lo     float64   `json:"lo"`
	Hi     float64   `json:"hi"`
	SD     float64   `json:"sd"` // sample standard deviation (0 for n < 2)
	N      int       `json:"n"`  // seeds that had a value
	Values []float64 `json:"-"`
}

// NewStat summarises per-seed values.
func NewStat(xs []float64) Stat {
	s := Stat{N: len(xs), Values: xs}
	if s.N == 0 {
		return Stat{Mean: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}
	}
	for _, x := range xs {
		s.Mean += x
	}
	s.Mean /= float64(s.N)
	s.Lo, s.Hi = s.Mean, s.Mean
	if s.N < 2 {
		return s
	}
	var ss float64
	for _, x := range xs {
		ss += (x - s.Mean) * (x - s.Mean)
	}
	s.SD = math.Sqrt(ss / float64(s.N-1))
	h := TQuantile975(s.N-1) * s.SD / math.Sqrt(float64(s.N))
	s.Lo, s.Hi = s.Mean-h, s.Mean+h
	return s
}

// HalfWidth is the interval's half width (0 with one seed).
func (s Stat) HalfWidth() float64 { return (s.Hi - s.Lo) / 2 }

// tTable holds t(0.975, df) for df = 1..30 (two-sided 95%).
var tTable = [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

// tTail holds t(0.975, df) beyond the table, interpolated linearly in 1/df
// (the standard way to read a t table between rows); df = ∞ is the normal
// quantile 1.960.
var tTail = [...]struct{ df, t float64 }{{30, 2.042}, {40, 2.021}, {60, 2.000}, {120, 1.980}, {math.Inf(1), 1.960}}

// TQuantile975 returns Student's t quantile t(0.975, df): the multiplier
// of a two-sided 95% confidence interval with df degrees of freedom.
// Fractional df (Welch) round down to the conservative side.
func TQuantile975(df int) float64 {
	if df < 1 {
		return math.Inf(1)
	}
	if df <= len(tTable) {
		return tTable[df-1]
	}
	x := 1 / float64(df)
	for i := 1; i < len(tTail); i++ {
		a, b := tTail[i-1], tTail[i]
		if float64(df) <= b.df {
			xa, xb := 1/a.df, 1/b.df
			return a.t + (b.t-a.t)*(xa-x)/(xa-xb)
		}
	}
	return 1.960
}

// WithinNoise reports whether two metrics' means differ by no more than
// noise explains: Welch's two-sided t test at the 5% level (the 95%
// interval of the difference of means, with Welch–Satterthwaite degrees of
// freedom, contains zero). known is false when either has fewer than two
// seeds, so nothing can be said.
func WithinNoise(a, b Stat) (within, known bool) {
	if a.N < 2 || b.N < 2 {
		return a.Mean == b.Mean, false
	}
	va, vb := a.SD*a.SD/float64(a.N), b.SD*b.SD/float64(b.N)
	d := math.Abs(a.Mean - b.Mean)
	if va+vb == 0 {
		return d == 0, true
	}
	df := (va + vb) * (va + vb) / (va*va/float64(a.N-1) + vb*vb/float64(b.N-1))
	return d <= TQuantile975(int(df))*math.Sqrt(va+vb), true
}
