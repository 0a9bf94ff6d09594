package cc

import (
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

func init() { registerConfig("fixed", (*FixedConfig).specs, NewFixed) }

// FixedConfig configures Fixed. Zero fields take the defaults below.
type FixedConfig struct {
	// Window is the constant window. Default the path's BDP (LineRate ×
	// BaseRTT), at least one MTU: enough to fill an empty path.
	// units.MaxBytes (parameter "unlimited") means no window limit.
	// Parameter "window".
	Window units.Bytes
	// Rate is the constant pacing rate. Default the line rate;
	// units.Unlimited (parameter "unlimited") turns pacing off. Parameter
	// "rate".
	Rate units.BitRate
}

// WithDefaults returns c with its zero fields set to the defaults for
// path, or path's error when it is not valid (a zero line rate, say).
func (c FixedConfig) WithDefaults(path PathInfo) (FixedConfig, error) {
	path, err := path.withDefaults()
	if err != nil {
		return c, err
	}
	if c.Window == 0 {
		c.Window = max(path.BDP(), path.MTU)
	}
	if c.Rate == 0 {
		c.Rate = path.LineRate
	}
	return c, nil
}

func (c *FixedConfig) specs(PathInfo) []spec {
	return []spec{
		{field: "Window", param: "window", kind: kSize, ptr: &c.Window, lo: 1, hi: inf},
		{field: "Rate", param: "rate", kind: kRate, ptr: &c.Rate, lo: 1, hi: inf},
	}
}

// Validate applies the defaults for path and checks every field. Errors
// name the field, its parameter, the value and the valid range.
func (c FixedConfig) Validate(path PathInfo) error {
	path, err := path.withDefaults()
	if err != nil {
		return err
	}
	if c, err = c.WithDefaults(path); err != nil {
		return err
	}
	return checkAll("fixed", c.specs(path))
}

// Fixed is no congestion control: a constant window and rate, for
// baselines, for paths whose NIC runs its own CC (the simulator's "NIC
// DCQCN" pairs it with the per-QP DCQCN), and for tests. It needs no
// signal and ignores every event.
//
// The zero Fixed is not usable; call NewFixed. A Fixed is not safe for
// concurrent use (it has no mutable state, but the contract is the same
// for every Algorithm).
type Fixed struct {
	window units.Bytes
	rate   units.BitRate
}

var _ Algorithm = (*Fixed)(nil)
var _ Stater = (*Fixed)(nil)

// NewFixed returns a Fixed for path. Zero fields of cfg take their
// defaults; invalid fields are an error naming the field.
func NewFixed(cfg FixedConfig, path PathInfo) (*Fixed, error) {
	path, err := path.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(path); err != nil {
		return nil, err
	}
	c, err := cfg.WithDefaults(path)
	if err != nil {
		return nil, err
	}
	return &Fixed{window: c.Window, rate: c.Rate}, nil
}

// Name returns "fixed".
func (f *Fixed) Name() string { return "fixed" }

// OnSend does nothing.
func (f *Fixed) OnSend(Sent) {}

// OnAck does nothing.
func (f *Fixed) OnAck(Ack) {}

// OnCNP does nothing.
func (f *Fixed) OnCNP(CNP) {}

// OnLoss does nothing.
func (f *Fixed) OnLoss(Loss) {}

// OnTimeout does nothing.
func (f *Fixed) OnTimeout(vtime.Time) {}

// OnTimer does nothing.
func (f *Fixed) OnTimer(vtime.Time) {}

// Deadline returns 0.
func (f *Fixed) Deadline() vtime.Time { return 0 }

// Window returns the configured window.
func (f *Fixed) Window() units.Bytes { return f.window }

// Rate returns the configured rate.
func (f *Fixed) Rate() units.BitRate { return f.rate }

// State returns the window (bytes) and rate (bit/s).
func (f *Fixed) State() map[string]float64 {
	return map[string]float64{"window_bytes": float64(f.window), "rate_bps": float64(f.rate)}
}
