package verbs

import (
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// tsKind says what a completion's timestamp field holds.
type tsKind uint8

const (
	tsNone      tsKind = iota // no device timestamps: stamp with the driver's clock per batch
	tsRaw                     // device cycles (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
	tsWallclock               // ns since the Unix epoch (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
)

// tsConv maps device completion timestamps onto the driver's vtime axis.
//
// Raw timestamps are free-running device cycles at CoreClockKHz, wrapping
// at mask (completion_timestamp_mask). At set-up the converter samples the
// device clock (ibv_query_rt_values_ex(3)) and the driver's clock together;
// a completion at cycle c then lands at base + (c - baseRaw) mod (mask+1)
// converted to ns. The device oscillator and the host clock drift apart by
// parts per million, so the sample is renewed by resync (the connection does
// so every second of polling). Wall-clock timestamps are ns on
// CLOCK_REALTIME and only need the offset between the two clocks.
//
// The zero tsConv (tsNone) converts everything to 0 ("unknown").
type tsConv struct {
	kind    tsKind
	khz     uint64 // device clock, kHz
	mask    uint64 // timestamp counter mask
	baseRaw uint64 // device clock at baseV
	baseV   vtime.Time
	wallOff int64 // wall ns - vtime ns
}

// newRawConv returns a converter for raw cycle timestamps sampled as
// (raw, now).
func newRawConv(khz, mask, raw uint64, now vtime.Time) tsConv {
	if mask == 0 {
		mask = ^uint64(0)
	}
	return tsConv{kind: tsRaw, khz: khz, mask: mask, baseRaw: raw & mask, baseV: now}
}

// newWallConv returns a converter for wall-clock timestamps, given a
// simultaneous reading of the wall clock and the driver's clock.
func newWallConv(wall time.Time, now vtime.Time) tsConv {
	return tsConv{kind: tsWallclock, wallOff: wall.UnixNano() - int64(now)}
}

// at converts a completion timestamp to vtime (0 if unknown).
func (c *tsConv) at(ts uint64) vtime.Time {
	switch c.kind {
	case tsRaw:
		if c.khz == 0 {
			return 0
		}
		d := (ts - c.baseRaw) & c.mask
		if d > c.mask/2 { // stamped before the base sample
			back := (c.baseRaw - ts) & c.mask
			return c.baseV.Add(-time.Duration(units.MulDiv(int64(back), 1e6, int64(c.khz))))
		}
		return c.baseV.Add(time.Duration(units.MulDiv(int64(d), 1e6, int64(c.khz))))
	case tsWallclock:
		v := vtime.Time(int64(ts) - c.wallOff)
		if v < vtime.Epoch {
			return vtime.Epoch
		}
		return v
	}
	return 0
}
