package pacing

import (
	"fmt"
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// PortConfig configures a Port. Zero fields take defaults.
type PortConfig struct {
	// LineRate is the NIC port's line rate; required (> 0; may be
	// units.Unlimited for a port with no aggregate limit).
	LineRate units.BitRate

	// Cap is the aggregate rate of all paths on the port, at most
	// LineRate; 0 means LineRate. A Cap below line rate enforces a
	// tenant share or a slower receiver; at line rate the Port still
	// bounds how far the engine's posts run ahead of the wire, so the
	// NIC's send queue stays short and per-path pacing is not undone by
	// a deep backlog released at line rate.
	Cap units.BitRate

	// Burst, PFCXoff and Segment are as in Config, with the same
	// defaults and ranges (the default Segment sized for LineRate, as
	// Config.LineRate does it); Segment is the largest post the paths
	// make, so that the port's bucket can hold one.
	Burst   units.Bytes
	PFCXoff units.Bytes
	Segment units.Bytes
}

// Port is the aggregate limiter of one NIC port: a token bucket like a
// Pacer's, refilled at the port's cap, which every path on the port
// consults next to its own Pacer (see the package doc). Its rate never
// exceeds the line rate.
//
// The zero Port is unpaced, like the zero Pacer; use NewPort. A Port is not
// safe for concurrent use and must not be copied after first use.
type Port struct {
	b        bucket
	lineRate units.BitRate
}

// NewPort returns a Port with a full bucket, or an error naming the
// PortConfig field, its value and its valid range.
func NewPort(cfg PortConfig) (*Port, error) {
	if cfg.LineRate <= 0 {
		return nil, fmt.Errorf("pacing: PortConfig.LineRate %v is out of range (valid: > 0, e.g. 100Gbps)", cfg.LineRate)
	}
	if cfg.Cap < 0 || cfg.Cap > cfg.LineRate {
		return nil, fmt.Errorf("pacing: PortConfig.Cap %v is out of range (valid: 1bps..LineRate %v, or 0 for LineRate)", cfg.Cap, cfg.LineRate)
	}
	r := cfg.Cap
	if r == 0 {
		r = cfg.LineRate
	}
	res, err := resolve("PortConfig", Config{Rate: r, Burst: cfg.Burst, PFCXoff: cfg.PFCXoff, Segment: cfg.Segment, LineRate: cfg.LineRate})
	if err != nil {
		return nil, err
	}
	p := &Port{lineRate: cfg.LineRate}
	p.b.init(res.rate, res.burst)
	return p, nil
}

// SetRate changes the aggregate cap at now, as Pacer.SetRate does; rates
// above the line rate (units.Unlimited included) are clamped to it. It
// does not allocate.
func (p *Port) SetRate(now vtime.Time, r units.BitRate) {
	checkRate("Port", r)
	p.b.setRate(now, min(r, p.lineRate))
}

// Rate returns the current aggregate cap.
func (p *Port) Rate() units.BitRate {
	if p.b.lim == nil {
		return units.Unlimited
	}
	return p.b.rate
}

// LineRate returns the port's line rate.
func (p *Port) LineRate() units.BitRate { return p.lineRate }

// Burst returns the bucket depth.
func (p *Port) Burst() units.Bytes { return p.b.burst }

// Budget returns how many bytes the port may send at now, as
// Pacer.Budget does.
func (p *Port) Budget(now vtime.Time) units.Bytes { return p.b.budget(now) }

// OnSent takes n bytes, posted at now on any path of the port, as
// Pacer.OnSent does (overshoot becomes debt).
func (p *Port) OnSent(now vtime.Time, n units.Bytes) { p.b.onSent(now, n) }

// NextSend returns the earliest instant the port's budget holds n bytes, as
// Pacer.NextSend does.
func (p *Port) NextSend(now vtime.Time, n units.Bytes) vtime.Time { return p.b.nextSend(now, n) }

// Refill returns how long the port's refill takes to add n bytes, as
// Pacer.Refill does.
func (p *Port) Refill(n units.Bytes) time.Duration { return p.b.refill(n) }
