// Package vtime is the time base of mptx's deterministic cores: an int64
// count of nanoseconds on a monotonic epoch chosen by the driver (process
// start on real hardware, zero in the simulator). The zero Time means
// "unset", so a zero deadline means "no timer".
//
// Cores never read a clock: every event they receive carries its time, and
// timers are returned as deadlines (vtime.Time). Drivers own the clock; a
// Clock interface and a monotonic implementation live here for them.
package vtime

import (
	"math"
	"time"
)

// Time is nanoseconds since the driver's epoch. The zero value is "unset".
// Time 0 itself is therefore never a valid instant; drivers start their
// epoch at 1 ns or later (Epoch).
type Time int64

// Epoch is the first valid instant. Drivers that count from zero start here.
const Epoch Time = 1

// Never is the largest Time; useful as an initial minimum.
const Never Time = math.MaxInt64

// IsZero reports whether t is unset.
func (t Time) IsZero() bool { return t == 0 }

// Add returns t+d, saturating at Never and at Epoch (never yields the zero
// "unset" value or a negative time from a valid t).
func (t Time) Add(d time.Duration) Time {
	s := t + Time(d)
	if d > 0 && s < t {
		return Never
	}
	if s < Epoch {
		return Epoch
	}
	return s
}

// Sub returns t-u as a duration.
func (t Time) Sub(u Time) time.Duration { return time.Duration(t - u) }

// Before reports whether t is before u.
func (t Time) Before(u Time) bool { return t < u }

// After reports whether t is after u.
func (t Time) After(u Time) bool { return t > u }

// Duration returns t as a duration since the epoch's zero.
func (t Time) Duration() time.Duration { return time.Duration(t) }

// String formats t as a duration since the epoch (e.g. "1.5ms").
func (t Time) String() string {
	if t == 0 {
		return "unset"
	}
	return time.Duration(t).String()
}

// Earliest returns the earlier of two deadlines, treating zero as "none".
func Earliest(a, b Time) Time {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	case a < b:
		return a
	}
	return b
}

// Clock is the driver's source of time. Cores never see it.
type Clock interface {
	Now() Time
}

// Monotonic is a Clock reading the process's monotonic clock, counted from
// the moment it was created (plus Epoch). Its zero value is not usable; call
// NewMonotonic. It is safe for concurrent use.
type Monotonic struct{ start time.Time }

// NewMonotonic returns a monotonic clock whose epoch is now.
func NewMonotonic() *Monotonic { return &Monotonic{start: time.Now()} }

// Now returns the time since the clock's epoch.
func (m *Monotonic) Now() Time { return Epoch + Time(time.Since(m.start)) }

// Wall converts t back to wall-clock time, for telemetry exporters that need
// time.Time.
func (m *Monotonic) Wall(t Time) time.Time { return m.start.Add(time.Duration(t - Epoch)) }
