package sim

import (
	"math"
	"math/bits"
	"strconv"
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// Time is simulation time: picoseconds since the start of the world. A
// picosecond grid is exact for every Ethernet rate the simulator models:
// one byte takes 320 ps at 25 Gb/s, 80 ps at 100 Gb/s, 20 ps at 400 Gb/s and
// 10 ps at 800 Gb/s, and rates that do not divide 8·10¹² carry their
// remainder from packet to packet (see Serialiser), so nothing drifts. An
// int64 of picoseconds covers 106 days.
type Time int64

// Time units.
const (
	Picosecond  Time = 1
	Nanosecond  Time = 1000
	Microsecond Time = 1000 * Nanosecond
	Millisecond Time = 1000 * Microsecond
	Second      Time = 1000 * Millisecond
)

// Start is the instant a new World begins at: 1 ns, so that every simulation
// instant converts to a valid (non-zero) vtime.Time at the qp boundary.
const Start Time = Nanosecond

// Forever is the largest Time.
const Forever Time = math.MaxInt64

// FromDuration converts a duration (ns) to simulation time, saturating.
func FromDuration(d time.Duration) Time {
	if d > time.Duration(math.MaxInt64/1000) {
		return Forever
	}
	if d < time.Duration(math.MinInt64/1000) {
		return -Forever
	}
	return Time(d) * Nanosecond
}

// Duration converts t to a duration, rounded down to the nanosecond.
func (t Time) Duration() time.Duration { return time.Duration(t / Nanosecond) }

// VTime converts t to the core's time base (ns), rounded down. Because a
// World starts at Start (1 ns) the result is never the zero "unset" value.
func (t Time) VTime() vtime.Time { return vtime.Time(t / Nanosecond) }

// FromVTime converts a core time (ns) to simulation time exactly.
func FromVTime(v vtime.Time) Time {
	if v > vtime.Time(math.MaxInt64/1000) {
		return Forever
	}
	return Time(v) * Nanosecond
}

// Seconds returns t in seconds as a float64, for reports.
func (t Time) Seconds() float64 { return float64(t) / float64(Second) }

// String formats t with the largest unit that keeps it readable, e.g.
// "12.345us".
func (t Time) String() string {
	switch a := max(t, -t); {
	case a >= Second:
		return strconv.FormatFloat(float64(t)/float64(Second), 'f', -1, 64) + "s"
	case a >= Millisecond:
		return strconv.FormatFloat(float64(t)/float64(Millisecond), 'f', -1, 64) + "ms"
	case a >= Microsecond:
		return strconv.FormatFloat(float64(t)/float64(Microsecond), 'f', -1, 64) + "us"
	case a >= Nanosecond:
		return strconv.FormatFloat(float64(t)/float64(Nanosecond), 'f', -1, 64) + "ns"
	}
	return strconv.FormatInt(int64(t), 10) + "ps"
}

// bitPs is the number of bit·picoseconds per bit-per-second: serialising b
// bits at r bit/s takes b·10¹²/r ps.
const bitPs = uint64(Second)

// Serialiser computes the serialisation time of successive frames on a link
// of a fixed rate in exact picoseconds. When the rate does not divide
// 8·10¹² ps·bit/s the fractional picoseconds are carried to the next frame,
// so that the sum over any run of frames is exact to within 1 ps: a long
// transfer at 3·10¹¹ bit/s neither gains nor loses time.
//
// The zero value serialises in zero time, as units.Unlimited does; call
// NewSerialiser.
type Serialiser struct {
	rate   uint64 // bit/s; 0 for units.Unlimited
	psPerB uint64 // ps per byte when exact, else 0
	rem    uint64 // carried bit·ps, < rate
}

// NewSerialiser returns a serialiser for rate r (> 0); units.Unlimited
// serialises in zero time.
func NewSerialiser(r units.BitRate) Serialiser {
	if r <= 0 {
		panic("sim: BUG: NewSerialiser with rate " + strconv.FormatInt(int64(r), 10))
	}
	if r == units.Unlimited {
		return Serialiser{}
	}
	s := Serialiser{rate: uint64(r)}
	if (8*bitPs)%s.rate == 0 {
		s.psPerB = 8 * bitPs / s.rate
	}
	return s
}

// Time returns how long n bytes take on the wire and advances the carried
// remainder.
func (s *Serialiser) Time(n int64) Time {
	if n <= 0 {
		return 0
	}
	if s.psPerB != 0 {
		return Time(uint64(n) * s.psPerB)
	}
	if s.rate == 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(n)*8, bitPs)
	var c uint64
	lo, c = bits.Add64(lo, s.rem, 0)
	hi += c
	q, r := bits.Div64(hi, lo, s.rate)
	s.rem = r
	return Time(q)
}

// TxTime returns the time n bytes take at rate r, rounded up to the
// picosecond (no carried remainder; for pacing and estimates).
func TxTime(r units.BitRate, n units.Bytes) Time {
	if n <= 0 || r == units.Unlimited {
		return 0
	}
	if r <= 0 {
		return Forever
	}
	hi, lo := bits.Mul64(uint64(n)*8, bitPs)
	if hi >= uint64(r) {
		return Forever
	}
	q, rem := bits.Div64(hi, lo, uint64(r))
	if rem != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return Forever
	}
	return Time(q)
}
