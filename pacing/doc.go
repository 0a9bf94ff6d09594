// Package pacing spaces out the bytes mptx posts on each path, and on each
// NIC port, with token buckets over bytes in virtual time.
//
// # Model
//
// A Pacer is a token bucket of depth Burst bytes refilled at Rate (bit/s),
// one per path (one RC queue pair). The path's congestion controller sets
// the rate (SetRate); the engine asks how much it may post now (Budget) or
// when n bytes will fit (NextSend), posts, and reports what it posted
// (OnSent). A Port is the same bucket for a NIC port as a whole, refilled at
// the port's line rate or a configured aggregate cap; paths on one port
// consult both, and the engine posts when both allow:
//
//	at := max(path.NextSend(now, seg), port.NextSend(now, seg))
//	if at <= now { post(seg); path.OnSent(now, seg); port.OnSent(now, seg) }
//	else         { arm the engine's one timer for at }
//
// Budgets only grow while nothing is sent, so the later of the two
// NextSend instants is when both allow.
//
// Chunks are posted as segments of at most Segment bytes so that pacing acts
// below chunk size: a 4 MiB chunk at the default 128 KiB Segment is 32
// posts, each released when the bucket holds it, instead of one 4 MiB burst
// at line rate. The default segment is sized by time, not bytes, above
// 100 Gb/s (Config.LineRate, SegmentRate): it keeps the 10.49 µs that
// 128 KiB takes at 100 Gb/s, so 512 KiB at 400 Gb/s. Each post costs the
// sender's CPU about the same whatever its size, so a 400 Gb/s path makes
// a quarter of the posts; the default bucket stays min(PFCXoff/2, four
// segments), 512 KiB with the default XOFF at any rate, so the bursts
// pacing lets out are no larger than at 128 KiB segments.
//
// # Why the bucket is shallower than PFC XOFF
//
// A burst of B bytes leaves the NIC at line rate C. Where it meets a switch
// port that drains at D < C (the first hop's ingress queue for this NIC,
// and any link slower than the NIC), the queue grows by B(1 - D/C) < B
// before the burst ends. A lossless (PFC) switch sends PAUSE upstream once
// an ingress queue passes its XOFF threshold, stalling every flow of that
// priority on the link: head-of-line blocking, congestion spreading and, at
// worst, deadlock (Guo et al., "RDMA over Commodity Ethernet at Scale",
// SIGCOMM'16). Keeping every bucket strictly below XOFF means that pacing
// alone can never push the queue that a path's (or, through Port, a NIC
// port's) bursts build past XOFF. The default depth is half of XOFF (at most
// four segments) so that the queue a burst finds, which is rarely empty,
// may hold another half before PAUSE: the steady rate below it is the CC's
// business (ECN marking should start well below XOFF). This bounds what
// one sender's pacing adds; it cannot bound many senders converging on one
// downstream port, which is what ECN-based CC is for.
//
// # Time and x/time/rate
//
// The buckets are golang.org/x/time/rate Limiters driven only through their
// explicit-time methods that do not allocate (AllowN, TokensAt, SetLimitAt,
// SetBurstAt; ReserveN is avoided because it returns a *Reservation). One
// token is one byte. vtime.Time is mapped to time.Time as time.Unix(0, t),
// which is monotone and allocation-free. Nothing here reads a clock or
// sleeps: every method takes now, and NextSend returns a deadline for the
// driver's timer.
//
// Time that goes backwards is treated as no time passing: each Pacer
// remembers the latest instant it was given and uses it in place of an
// earlier one. (Deviation: rate.Limiter itself re-credits tokens when time
// returns forward after a backward jump; see its TestLimiterJumpBackwards.)
// Huge times, rates and sizes saturate instead of overflowing.
//
// # Units and rounding
//
// Rates are units.BitRate (bit/s; units.Unlimited means no pacing), sizes
// units.Bytes, times vtime.Time (ns). Budget rounds the bucket's fractional
// token count down to whole bytes (after adding 1/1024 byte so that
// float64 error cannot hide a byte that has exactly accrued); NextSend
// rounds up to the next nanosecond and is exact against Budget: Budget at the
// returned instant holds n, one nanosecond earlier it does not. 64 KiB at
// 100 Gb/s is 5242.88 ns, so NextSend waits 5243 ns from an empty bucket.
//
// # Ownership
//
// Pacer and Port have one owner (the engine's event loop) and are not safe
// for concurrent use: even Budget and NextSend update bookkeeping. They must
// not be copied after first use.
package pacing
