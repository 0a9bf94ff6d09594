// Package cc holds mptx's congestion-control algorithms as deterministic,
// I/O-free state machines: DCQCN and TIMELY (rate-based), Swift and HPCC
// (window-based) and Fixed.
//
// # Model
//
// One Algorithm value controls one (connection, path) pair: one RC queue
// pair to one peer over one NIC port. It receives events that carry their
// own time (Sent, Ack, CNP, Loss, OnTimeout, OnTimer) and answers queries
// (Window, Rate, Deadline). It never reads a clock, sleeps, starts
// goroutines, uses global randomness or touches the sender: the driver
// applies Window to the bytes it lets into flight and Rate to the path's
// pacer, and calls OnTimer when Deadline passes. A zero Deadline means no
// timer is pending; late OnTimer calls are tolerated and early ones are
// no-ops.
//
// Algorithms are not safe for concurrent use; each has one owner.
//
// Time inside an algorithm never runs backwards: an event stamped earlier
// than one already seen is treated as happening at the later time. Every
// event first runs the algorithm's timers that are due at or before its
// Now, so results do not depend on whether (or how late) the driver called
// OnTimer first. Event methods never fail, never allocate and tolerate
// zero, negative and huge values (they are clamped); Window and Rate are
// always at least 1.
//
// # Algorithms
//
// Each is registered under its name and has a typed config, a constructor
// that validates it, and documented, cited defaults:
//
//   - "dcqcn": DCQCN (Zhu et al., SIGCOMM 2015), rate-based. Signal: CNPs
//     (OnCNP); OnSend feeds its byte counter. Works on verbs (CNP
//     counters) and in the simulator, which also runs it per QP as the
//     NIC's DCQCN, driven per packet.
//   - "timely": TIMELY (Mittal et al., SIGCOMM 2015), rate-based. Signal:
//     RTT samples (Ack.RTT) and their gradient.
//   - "swift": Swift (Kumar et al., SIGCOMM 2020), window-based, pacing
//     below one MTU. Signals: RTT samples against a delay target, losses
//     and timeouts.
//   - "hpcc": HPCC (Li et al., SIGCOMM 2019), window-based with rate W/T.
//     Signal: per-hop INT on every ACK (Ack.Hops), which only the
//     simulator provides; without it (verbs) HPCC holds its window.
//   - "fixed": a constant window and rate; no signal.
//
// Algorithms that expose internal state (DCQCN's α and target rate,
// Swift's cwnd, HPCC's U, ...) implement Stater.
//
// # Configuration
//
// NewDCQCN(DCQCNConfig, PathInfo) and its siblings take typed configs
// whose zero fields take the defaults documented on each field (many scale
// with the path: DCQCN's AI with the line rate, HPCC's T with the base
// RTT). Fields that may legitimately be zero (a timer turned off) take a
// negative value for zero. Validation errors name the field, its registry
// parameter, the bad value and the valid range.
//
// New(name, params, path) builds any registered algorithm from string
// parameters, as the CLI and experiment specs give them: numbers
// ("0.0039"), durations ("50us"), rates ("40Mbps", units.ParseBitRate)
// and sizes ("4KiB", units.ParseBytes). Parameters are literal ("0" turns
// a field off where that is allowed); unknown names and bad values are
// errors. Names lists the registered algorithms.
//
// # Units
//
// Times are vtime.Time (ns), durations time.Duration, sizes units.Bytes,
// rates units.BitRate (bit/s). Rate-based algorithms report
// Window() == units.MaxBytes unless they cap in-flight bytes; window-based
// ones report Rate() == units.Unlimited unless they pace.
package cc

import (
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// MaxHops is the largest number of in-band telemetry hops an Ack carries.
const MaxHops = 8

// INTHop is one switch egress port's in-band telemetry stamp, as HPCC's INT
// header carries it (Li et al., SIGCOMM'19, §3.2 and Fig. 5): the egress
// queue length when the packet left, the port's cumulative transmitted bytes,
// the timestamp of that reading and the port's line rate.
type INTHop struct {
	QLen    units.Bytes   // egress queue length when stamped
	TxBytes units.Bytes   // cumulative bytes transmitted by the egress port
	TS      vtime.Time    // when the stamp was taken
	Rate    units.BitRate // egress line rate
}

// Sent reports bytes handed to the NIC on the path.
type Sent struct {
	Now      vtime.Time
	Bytes    units.Bytes
	InFlight units.Bytes // bytes in flight on the path after this send
}

// Ack reports bytes acknowledged on the path (a send completion).
type Ack struct {
	Now      vtime.Time
	Acked    units.Bytes   // bytes newly acknowledged
	RTT      time.Duration // RTT sample, 0 if none
	InFlight units.Bytes   // bytes in flight on the path after this ack
	// ECNMarked is the number of acknowledged bytes that carried CE marks,
	// where the backend can tell (the simulator can, verbs cannot).
	ECNMarked units.Bytes
	// Hops and NHops carry per-hop INT telemetry for HPCC; NHops == 0 means
	// none (HPCC then holds its window).
	Hops  [MaxHops]INTHop
	NHops int
}

// CNP reports congestion notification packets received by the sender for
// this path since the previous CNP event.
type CNP struct {
	Now   vtime.Time
	Count int
}

// Loss reports bytes declared lost (a NAK / go-back-N retransmission or a
// failed work request that will be resent).
type Loss struct {
	Now  vtime.Time
	Lost units.Bytes
}

// Algorithm is one path's congestion controller.
type Algorithm interface {
	// Name returns the registry name ("dcqcn", "timely", ...).
	Name() string
	OnSend(Sent)
	OnAck(Ack)
	OnCNP(CNP)
	OnLoss(Loss)
	// OnTimeout reports a retransmission/chunk timeout on the path.
	OnTimeout(now vtime.Time)
	// OnTimer is called at or after Deadline.
	OnTimer(now vtime.Time)
	// Deadline returns the next instant OnTimer wants to run, 0 if none.
	Deadline() vtime.Time
	// Window returns the most bytes the path may have in flight.
	Window() units.Bytes
	// Rate returns the rate the path's pacer should send at.
	Rate() units.BitRate
}

// Stater is implemented by algorithms that expose internal state for
// telemetry and tests (for example DCQCN's alpha and target rate).
type Stater interface {
	State() map[string]float64
}

// PathInfo describes the path an algorithm will control. Many defaults scale
// with it (DCQCN's AI with the line rate, HPCC's T with the base RTT).
type PathInfo struct {
	LineRate units.BitRate // NIC port rate; required, > 0
	BaseRTT  time.Duration // propagation + serialisation RTT of an empty path; required, > 0
	MTU      units.Bytes   // payload bytes per packet; 0 means 4096
	Hops     int           // switch hops on the path; 0 means 1
}
