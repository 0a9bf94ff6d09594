package units

import (
	"strings"
	"testing"
)

// maxErrLen bounds an error message: a parse error names the bad input,
// clipped, so that a 50 MB value never floods a terminal.
const maxErrLen = 512

// FuzzParseBytes: ParseBytes never panics, its errors are one short line,
// and an accepted size formats back to itself.
func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"4MiB", "64KiB", "4KB", "1.5MB", "4096", "4096B", "0", "1TiB", "8EiB", "-1", "1e30GB", "NaN", "0.5B", " 12 k ", strings.Repeat("9", 400)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBytes(s)
		if err != nil {
			if len(err.Error()) > maxErrLen || strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("ParseBytes(%.40q) error is %d bytes or several lines", s, len(err.Error()))
			}
			return
		}
		if b < 0 {
			t.Fatalf("ParseBytes(%q) = %d, negative", s, b)
		}
		if b == MaxBytes {
			return
		}
		back, err := ParseBytes(b.String())
		if err != nil || back != b {
			t.Fatalf("ParseBytes(%q) = %d; its String %q parses as %d, %v", s, b, b.String(), back, err)
		}
	})
}

// FuzzParseBitRate: ParseBitRate never panics, its errors are one short
// line, and an accepted rate below 1 Pbit/s (where float64 holds every
// integer the String form needs) formats back to itself.
func FuzzParseBitRate(f *testing.F) {
	for _, s := range []string{"100Gbps", "25G", "2.5Gb/s", "40Mbps", "1000000", "unlimited", "0", "1.234567891Gbps", "-5G", "1e400", "Inf", "9Tbit", strings.Repeat("1", 300) + "bps"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseBitRate(s)
		if err != nil {
			if len(err.Error()) > maxErrLen || strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("ParseBitRate(%.40q) error is %d bytes or several lines", s, len(err.Error()))
			}
			return
		}
		if r < 0 {
			t.Fatalf("ParseBitRate(%q) = %d, negative", s, r)
		}
		if r == Unlimited || r > 1e15 {
			return
		}
		back, err := ParseBitRate(r.String())
		if err != nil || back != r {
			t.Fatalf("ParseBitRate(%q) = %d; its String %q parses as %d, %v", s, r, r.String(), back, err)
		}
	})
}
