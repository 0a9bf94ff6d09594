package pacing

import (
	"fmt"
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// Defaults and limits.
const (
	// DefaultPFCXoff is the PFC XOFF threshold assumed when none is
	// configured: 1 MiB. The sender cannot see a switch's thresholds, so
	// this is a static stand-in for the common dynamic one. The HPCC ns-3
	// switch sets XOFF to free shared buffer / 8 (alibaba-edu/
	// High-Precision-Congestion-Control, switch-mmu; CC-PARAMS.md, "Switch
	// buffers, ECN, PFC"); 1 MiB is that rule with 8 MiB of the shared
	// buffer free, a loaded shallow-buffer ToR [derived, not measured]. It sits
	// below the ECN Kmax the same simulator uses at 100 Gb/s (1600 KB), so
	// the resulting 512 KiB bucket is also under the point where ECN marks
	// every packet. Configure the real value when the switch's is known.
	DefaultPFCXoff units.Bytes = 1 * units.MiB

	// DefaultSegment is the default post size: 128 KiB, NCCL's network
	// chunk size (CC-PARAMS.md, "Slice sizes in the field"). It is 10.5 µs
	// at 100 Gb/s, so pacing acts at about a base RTT, and a 4 MiB chunk is
	// 32 posts, few enough that per-post overhead stays small. Above
	// SegmentRate the default keeps this time rather than this size.
	DefaultSegment units.Bytes = 128 * units.KiB

	// SegmentRate is the line rate DefaultSegment is sized for. On a
	// faster path the default segment keeps DefaultSegment's time at this
	// rate (10.49 µs) instead of its size: 256 KiB at 200 Gb/s, 512 KiB at
	// 400 Gb/s (see Config.LineRate). Pacing then acts at the same time
	// granularity at every rate, and a 400 Gb/s path posts a quarter of the
	// work requests, each costing the CPU the same whatever its size.
	SegmentRate = 100 * units.Gbps

	// DefaultBurstSegments caps the default bucket depth at this many
	// segments: deep enough that a timer firing a few segment-times late
	// does not lose rate (quic-go's pacer allows a burst of 10 packets for
	// the same reason), shallow enough to stay a small fraction of XOFF.
	DefaultBurstSegments = 4

	// MinSegment is the smallest segment, and so the smallest bucket:
	// one 4 KiB RoCE MTU. Smaller posts only add per-post overhead.
	MinSegment units.Bytes = 4 * units.KiB

	// MaxBurst is the deepest bucket, and so the largest segment: 1 GiB,
	// far beyond any switch buffer, and small enough that the limiter's
	// float64 token count resolves well below a byte.
	MaxBurst units.Bytes = 1 * units.GiB
)

// Config configures a Pacer. Zero fields take the defaults below.
type Config struct {
	// Rate is the initial pacing rate; 0 means units.Unlimited (no
	// pacing until SetRate). Negative is an error.
	Rate units.BitRate

	// Burst is the bucket depth: the most bytes sent back to back at
	// line rate after an idle period. It must be in [Segment, PFCXoff)
	// and at most MaxBurst.
	// 0 means min(PFCXoff/2, DefaultBurstSegments*Segment, MaxBurst), at
	// least one Segment: 512 KiB with the other defaults. See the package doc for
	// why it must stay below XOFF.
	Burst units.Bytes

	// PFCXoff is the XOFF threshold of the lossless priority's ingress
	// queue on the switches this path crosses, in bytes; at least
	// 2*MinSegment. 0 means DefaultPFCXoff. On a fabric without PFC, set
	// it to the queue depth the pacer should never fill by itself (or
	// units.MaxBytes, which leaves the default burst at
	// DefaultBurstSegments segments).
	PFCXoff units.Bytes

	// Segment is the size the engine posts a chunk in. It
	// must be in [MinSegment, Burst]. 0 means DefaultSegment (scaled up
	// with LineRate above SegmentRate), reduced to Burst (or to PFCXoff/2
	// when Burst is 0 too) when that is smaller.
	Segment units.Bytes

	// LineRate is the path's line rate; it sizes the default Segment.
	// Up to SegmentRate (and when 0) the default is DefaultSegment; above
	// it, the bytes the line rate carries in DefaultSegment's time at
	// SegmentRate, in whole MinSegments: 512 KiB at 400 Gb/s. The default
	// Burst is still min(PFCXoff/2, DefaultBurstSegments segments), so a
	// larger segment never deepens the bucket past PFCXoff/2: at 400 Gb/s
	// with the default XOFF the bucket stays 512 KiB (one segment instead
	// of four), and bursts stay as large as before. Negative is an error.
	LineRate units.BitRate
}

// autoSegment returns the default segment for a path of line rate line
// (see Config.LineRate), before the caps of Burst and PFCXoff.
func autoSegment(line units.BitRate) units.Bytes {
	if line <= SegmentRate || line == units.Unlimited {
		return DefaultSegment
	}
	// DefaultSegment × line/SegmentRate, rounded down to MinSegment,
	// without overflow: DefaultSegment/MinSegment is 32.
	k := uint64(line) / (uint64(SegmentRate) / uint64(DefaultSegment/MinSegment))
	return units.Bytes(min(k, uint64(MaxBurst/MinSegment))) * MinSegment
}

// resolved is a validated Config with its defaults filled in.
type resolved struct {
	rate                 units.BitRate
	burst, xoff, segment units.Bytes
}

// resolve validates cfg and fills in its defaults. what names the config
// type in errors.
func resolve(what string, cfg Config) (resolved, error) {
	r := resolved{rate: cfg.Rate, burst: cfg.Burst, xoff: cfg.PFCXoff, segment: cfg.Segment}
	if cfg.LineRate < 0 {
		return r, fmt.Errorf("pacing: %s.LineRate %v is out of range (valid: > 0, or 0 for at most %v)", what, cfg.LineRate, SegmentRate)
	}
	auto := autoSegment(cfg.LineRate)
	if r.rate < 0 {
		return r, fmt.Errorf("pacing: %s.Rate %v is out of range (valid: > 0, or 0 for unlimited)", what, r.rate)
	}
	if r.rate == 0 {
		r.rate = units.Unlimited
	}
	switch {
	case r.xoff == 0:
		r.xoff = DefaultPFCXoff
	case r.xoff < 2*MinSegment:
		return r, fmt.Errorf("pacing: %s.PFCXoff %v is out of range (valid: >= %v, or 0 for the default %v)", what, r.xoff, 2*MinSegment, DefaultPFCXoff)
	}
	if r.burst != 0 && (r.burst < MinSegment || r.burst >= r.xoff) {
		return r, fmt.Errorf("pacing: %s.Burst %v is out of range (valid: %v up to but not including PFCXoff %v, or 0 for the default): a bucket as deep as XOFF lets pacing alone fill a switch queue to PAUSE", what, r.burst, MinSegment, r.xoff)
	}
	if r.burst > MaxBurst {
		return r, fmt.Errorf("pacing: %s.Burst %v is out of range (valid: %v..%v, below PFCXoff, or 0 for the default)", what, r.burst, MinSegment, MaxBurst)
	}
	switch {
	case r.segment == 0 && r.burst != 0:
		r.segment = min(auto, r.burst)
	case r.segment == 0:
		r.segment = max(min(auto, r.xoff/2), MinSegment)
	case r.segment < MinSegment:
		return r, fmt.Errorf("pacing: %s.Segment %v is out of range (valid: %v..Burst, or 0 for the default %v)", what, r.segment, MinSegment, DefaultSegment)
	case r.burst != 0 && r.segment > r.burst:
		return r, fmt.Errorf("pacing: %s.Segment %v exceeds Burst %v (valid: %v..Burst, or 0 for the default %v)", what, r.segment, r.burst, MinSegment, DefaultSegment)
	case r.segment > MaxBurst:
		return r, fmt.Errorf("pacing: %s.Segment %v is out of range (valid: %v..%v, at most Burst and below PFCXoff, or 0 for the default %v)", what, r.segment, MinSegment, MaxBurst, DefaultSegment)
	case r.segment >= r.xoff:
		return r, fmt.Errorf("pacing: %s.Segment %v is not below PFCXoff %v (valid: %v up to but not including PFCXoff, or 0 for the default %v)", what, r.segment, r.xoff, MinSegment, DefaultSegment)
	}
	if r.burst == 0 {
		// Segment < XOFF here, so the result is below XOFF too.
		r.burst = max(r.segment, min(r.xoff/2, DefaultBurstSegments*r.segment, MaxBurst))
	}
	return r, nil
}

// Pacer paces one path: a token bucket of Burst() bytes refilled at Rate().
// See the package doc for the model, the units and the rounding.
//
// The zero Pacer is unpaced: Budget is units.MaxBytes, NextSend returns its
// argument, OnSent does nothing, and SetRate panics; use New. A Pacer is not
// safe for concurrent use and must not be copied after first use.
type Pacer struct {
	b       bucket
	segment units.Bytes
	xoff    units.Bytes
}

// New returns a Pacer with a full bucket, or an error naming the Config
// field, its value and its valid range.
func New(cfg Config) (*Pacer, error) {
	r, err := resolve("Config", cfg)
	if err != nil {
		return nil, err
	}
	p := &Pacer{segment: r.segment, xoff: r.xoff}
	p.b.init(r.rate, r.burst)
	return p, nil
}

// SetRate changes the rate at now. Bytes that accrued before now accrued at
// the old rate; a debt (see OnSent) keeps what the old rate repaid and
// repays the rest at the new one. units.Unlimited stops pacing and forgives
// any debt; returning to a finite rate later starts with a full bucket. A
// rate of 0 stops the refill: Budget keeps what is in the bucket and
// NextSend returns vtime.Never for more. A negative rate panics (a bug in
// the caller). SetRate does not allocate.
func (p *Pacer) SetRate(now vtime.Time, r units.BitRate) {
	checkRate("Pacer", r)
	p.b.setRate(now, r)
}

// Rate returns the current rate (units.Unlimited when unpaced).
func (p *Pacer) Rate() units.BitRate {
	if p.b.lim == nil {
		return units.Unlimited
	}
	return p.b.rate
}

// Burst returns the bucket depth.
func (p *Pacer) Burst() units.Bytes { return p.b.burst }

// Segment returns the configured post size.
func (p *Pacer) Segment() units.Bytes { return p.segment }

// PFCXoff returns the XOFF threshold the burst was checked against.
func (p *Pacer) PFCXoff() units.Bytes { return p.xoff }

// Budget returns how many bytes may be sent at now: the bucket's whole
// bytes, in [0, Burst()], 0 while in debt; units.MaxBytes when unpaced. It
// does not allocate.
func (p *Pacer) Budget(now vtime.Time) units.Bytes { return p.b.budget(now) }

// OnSent takes n bytes, posted at now, from the bucket. The contract is
// n <= Budget(now). Otherwise the pacer does not refuse (the bytes are
// already on their way) but records a debt: the bucket is emptied and the
// n - Budget(now) bytes still owed must be repaid by the refill before
// Budget is positive again, so the long-run rate holds even when a caller
// overshoots. n <= 0 is ignored. OnSent does not allocate.
func (p *Pacer) OnSent(now vtime.Time, n units.Bytes) { p.b.onSent(now, n) }

// NextSend returns the earliest instant at which Budget holds n bytes: now
// itself when it already does (including when unpaced, or n <= 0), never
// the zero Time, and vtime.Never when the rate is 0 and the bucket cannot
// fill. n above Burst() is treated as Burst(), the most the bucket holds;
// sending more than that at once is an overshoot (see OnSent). NextSend
// never sleeps; the driver arms a timer for the instant. It does not
// allocate.
func (p *Pacer) NextSend(now vtime.Time, n units.Bytes) vtime.Time { return p.b.nextSend(now, n) }

// Refill returns how long the bucket's refill takes to add n bytes at the
// current rate, rounded up to the nanosecond: after a Budget reading of b,
// a send of s > b bytes can go Refill(s-b) later. It is the arithmetic of
// NextSend without its bucket reads, for callers that already hold a
// Budget reading. It returns 0 for n <= 0 or an unpaced Pacer and the
// longest Duration at rate 0. It does not allocate.
func (p *Pacer) Refill(n units.Bytes) time.Duration { return p.b.refill(n) }
