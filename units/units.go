// Package units defines the typed quantities used across mptx: byte counts
// (Bytes) and bit rates (BitRate, in bits per second), with conversions
// between them and durations that never overflow silently.
//
// Every conversion is exact integer arithmetic on 128-bit intermediates
// (math/bits), rounded as documented, and saturates at the largest
// representable value instead of wrapping. Unlimited is the saturated rate
// and means "no limit".
package units

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Bytes is a count of bytes. It is signed so that differences are natural;
// negative values are invalid as sizes and rejected by constructors that take
// sizes.
type Bytes int64

// Byte multiples. The binary ones (KiB, MiB, GiB) are used for buffers and
// chunk sizes; the decimal ones (KB, MB, GB) appear in switch configuration
// and papers.
const (
	Byte Bytes = 1
	KiB  Bytes = 1 << 10
	MiB  Bytes = 1 << 20
	GiB  Bytes = 1 << 30
	TiB  Bytes = 1 << 40
	KB   Bytes = 1000
	MB   Bytes = 1000 * KB
	GB   Bytes = 1000 * MB
)

// MaxBytes is the largest representable byte count.
const MaxBytes Bytes = math.MaxInt64

// BitRate is a rate in bits per second.
type BitRate int64

// Rate multiples (decimal, as link speeds are quoted).
const (
	BitPerSecond BitRate = 1
	Kbps         BitRate = 1e3
	Mbps         BitRate = 1e6
	Gbps         BitRate = 1e9
	Tbps         BitRate = 1e12
)

// Unlimited is the largest BitRate; it means "no rate limit".
const Unlimited BitRate = math.MaxInt64

const nsPerSecond = uint64(time.Second)

// mulDiv returns floor(a*b/c), saturating at math.MaxInt64. c must be > 0.
func mulDiv(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= c { // quotient would not fit in 64 bits
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, c)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return q
}

// mulDivCeil returns ceil(a*b/c), saturating at math.MaxInt64. c must be > 0.
func mulDivCeil(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, c)
	if r != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return q
}

// MulDiv returns floor(a*b/c) computed on a 128-bit intermediate, saturating
// at math.MaxInt64. It panics if c <= 0 or a or b is negative: those are
// programming errors, not data errors.
func MulDiv(a, b, c int64) int64 {
	if a < 0 || b < 0 || c <= 0 {
		panic(fmt.Sprintf("units: BUG: MulDiv(%d, %d, %d) needs a, b >= 0 and c > 0", a, b, c))
	}
	return int64(mulDiv(uint64(a), uint64(b), uint64(c)))
}

// TxTime returns the time needed to serialise n bytes at rate r, rounded up to
// the next nanosecond. It returns 0 for n <= 0 or r == Unlimited and the
// largest duration for r <= 0 (a zero rate never finishes).
func (r BitRate) TxTime(n Bytes) time.Duration {
	if n <= 0 || r == Unlimited {
		return 0
	}
	if r <= 0 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(mulDivCeil(uint64(n)*8, nsPerSecond, uint64(r)))
}

// BytesIn returns how many whole bytes rate r carries in d, rounded down. It
// returns 0 for d <= 0 or r <= 0 and MaxBytes for r == Unlimited.
func (r BitRate) BytesIn(d time.Duration) Bytes {
	if d <= 0 || r <= 0 {
		return 0
	}
	if r == Unlimited {
		return MaxBytes
	}
	return Bytes(mulDiv(uint64(r), uint64(d), 8*nsPerSecond))
}

// RateOf returns the rate that moves n bytes in d, rounded down. It returns 0
// for n <= 0 and Unlimited for d <= 0.
func RateOf(n Bytes, d time.Duration) BitRate {
	if n <= 0 {
		return 0
	}
	if d <= 0 {
		return Unlimited
	}
	if uint64(n) > math.MaxUint64/8 {
		return Unlimited
	}
	return BitRate(mulDiv(uint64(n)*8, nsPerSecond, uint64(d)))
}

// BytesPerSecond returns r in bytes per second as a float64, for reporting.
func (r BitRate) BytesPerSecond() float64 { return float64(r) / 8 }

// Scale returns r*f rounded down, clamped to [0, Unlimited]. f is a float
// because CC algorithms multiply rates by fractions such as (1 - alpha/2).
func (r BitRate) Scale(f float64) BitRate {
	v := float64(r) * f
	switch {
	case v <= 0 || math.IsNaN(v):
		return 0
	case v >= math.MaxInt64:
		return Unlimited
	}
	return BitRate(v)
}

// Clamp returns r limited to [lo, hi].
func (r BitRate) Clamp(lo, hi BitRate) BitRate { return max(lo, min(r, hi)) }

// Clamp returns b limited to [lo, hi].
func (b Bytes) Clamp(lo, hi Bytes) Bytes { return max(lo, min(b, hi)) }

// AddSat returns a+b saturating at MaxBytes (both assumed non-negative).
func (b Bytes) AddSat(c Bytes) Bytes {
	if s := b + c; s >= b {
		return s
	}
	return MaxBytes
}

// String formats b with a binary unit when it is an exact multiple
// (4MiB, 64KiB) and in bytes otherwise (4097B).
func (b Bytes) String() string {
	switch {
	case b == MaxBytes:
		return "unlimited"
	case b != 0 && b%GiB == 0:
		return strconv.FormatInt(int64(b/GiB), 10) + "GiB"
	case b != 0 && b%MiB == 0:
		return strconv.FormatInt(int64(b/MiB), 10) + "MiB"
	case b != 0 && b%KiB == 0:
		return strconv.FormatInt(int64(b/KiB), 10) + "KiB"
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// String formats r with the largest decimal unit that keeps it readable
// (100Gbps, 2.5Gbps, 40Mbps).
func (r BitRate) String() string {
	if r == Unlimited {
		return "unlimited"
	}
	for _, u := range []struct {
		v    BitRate
		name string
	}{{Tbps, "Tbps"}, {Gbps, "Gbps"}, {Mbps, "Mbps"}, {Kbps, "Kbps"}} {
		if r >= u.v {
			return strconv.FormatFloat(float64(r)/float64(u.v), 'f', -1, 64) + u.name
		}
	}
	return strconv.FormatInt(int64(r), 10) + "bps"
}

// ParseBitRate parses a rate such as "100Gbps", "25G", "2.5Gb/s", "40Mbps" or
// "1000000" (bit/s). "unlimited" parses as Unlimited.
func ParseBitRate(s string) (BitRate, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "unlimited") {
		return Unlimited, nil
	}
	low := strings.ToLower(t)
	low = strings.TrimSuffix(low, "/s")
	low = strings.TrimSuffix(low, "ps")
	low = strings.TrimSuffix(low, "bit")
	low = strings.TrimSuffix(low, "b")
	mult := float64(1)
	if n := len(low); n > 0 {
		switch low[n-1] {
		case 'k':
			mult, low = 1e3, low[:n-1]
		case 'm':
			mult, low = 1e6, low[:n-1]
		case 'g':
			mult, low = 1e9, low[:n-1]
		case 't':
			mult, low = 1e12, low[:n-1]
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(low), 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("units: bad bit rate %s: want a non-negative number with an optional unit (bps, Kbps, Mbps, Gbps, Tbps), e.g. 100Gbps", quoteClip(s))
	}
	// Round: 1.001Kbps is 1000.9999999999999 in binary floating point.
	f := math.Round(v * mult)
	if f >= math.MaxInt64 {
		return 0, fmt.Errorf("units: bit rate %s overflows (max %d bit/s)", quoteClip(s), int64(math.MaxInt64))
	}
	return BitRate(f), nil
}

// ParseBytes parses a size such as "4MiB", "64KiB", "4KB", "1.5MB", "4096" or
// "4096B". Binary suffixes (KiB, MiB, GiB, TiB) are powers of 1024 and decimal
// ones (KB, MB, GB, TB) powers of 1000; "K", "M", "G" alone are binary.
func ParseBytes(s string) (Bytes, error) {
	t := strings.TrimSpace(s)
	low := strings.ToLower(t)
	mult := float64(1)
	for _, u := range []struct {
		suf string
		m   float64
	}{
		{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
		{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
		{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
		{"b", 1},
	} {
		if strings.HasSuffix(low, u.suf) {
			mult, low = u.m, strings.TrimSuffix(low, u.suf)
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(low), 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("units: bad size %s: want a non-negative number with an optional unit (B, KiB, MiB, GiB, KB, MB, GB), e.g. 4MiB", quoteClip(s))
	}
	f := v * mult
	if f >= math.MaxInt64 {
		return 0, fmt.Errorf("units: size %s overflows (max %d bytes)", quoteClip(s), int64(math.MaxInt64))
	}
	// A whole number of bytes, up to binary floating point's rounding
	// (1.001KB is 1000.9999999999999).
	r := math.Round(f)
	if math.Abs(f-r) > 1e-9*math.Max(1, f) {
		return 0, fmt.Errorf("units: size %s is not a whole number of bytes", quoteClip(s))
	}
	return Bytes(r), nil
}

// quoteClip quotes s for an error message, clipped to 64 bytes, so that a
// huge value never floods a terminal.
func quoteClip(s string) string {
	if len(s) <= 64 {
		return strconv.Quote(s)
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("… (%d bytes)", len(s))
}
