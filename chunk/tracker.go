package chunk

import (
	"fmt"

	"github.com/mptx-dev/mptx/units"
)

// Tracker is the bounded FIFO of chunks in flight on one path (one RC
// queue pair), after raft's tracker.Inflights. An RC QP completes its work
// requests in posting order (a completion also covers earlier unsignaled
// ones), so a completion for a chunk acknowledges it and every chunk posted
// before it on that QP (Ack), and an error completion, after which the QP
// flushes everything, loses them all (Lost).
//
// Add panics when the Tracker is Full: callers check Full first, which is
// how the engine caps the chunks outstanding per path. Nothing allocates
// after NewTracker.
//
// The zero Tracker has capacity 0 and is always Full. A Tracker is not safe
// for concurrent use.
type Tracker struct {
	ring  []Chunk
	start int         // index in ring of the oldest chunk
	n     int         // chunks in flight
	bytes units.Bytes // sum of their Len
}

// NewTracker returns an empty tracker for at most capacity chunks in flight
// (capacity in [1, MaxChunks]).
func NewTracker(capacity int) (*Tracker, error) {
	if capacity < 1 || capacity > MaxChunks {
		return nil, fmt.Errorf("chunk: tracker capacity %d is out of range (valid: 1..%d)", capacity, MaxChunks)
	}
	return &Tracker{ring: make([]Chunk, capacity)}, nil
}

// Cap returns the capacity.
func (t *Tracker) Cap() int { return len(t.ring) }

// Len returns the number of chunks in flight.
func (t *Tracker) Len() int { return t.n }

// Full reports whether Add would panic.
func (t *Tracker) Full() bool { return t.n == len(t.ring) }

// InFlight returns the bytes of the chunks in flight.
func (t *Tracker) InFlight() units.Bytes { return t.bytes }

// Add records c as posted, after every chunk already in flight. It panics
// if the tracker is Full.
func (t *Tracker) Add(c Chunk) {
	if t.Full() {
		panic(fmt.Sprintf("chunk: BUG: Tracker.Add when full (%d chunks in flight); check Full first", t.n))
	}
	t.ring[(t.start+t.n)%len(t.ring)] = c
	t.n++
	t.bytes += c.Len
}

// Oldest returns the chunk posted first among those in flight.
func (t *Tracker) Oldest() (Chunk, bool) {
	if t.n == 0 {
		return Chunk{}, false
	}
	return t.ring[t.start], true
}

// Ack acknowledges the oldest in-flight chunk of the transfer with that
// index and every chunk posted before it, and returns how many it removed.
// A completion matching nothing in flight (stale, or for another path)
// removes nothing and returns 0.
func (t *Tracker) Ack(transfer uint64, index uint32) int {
	for k := range t.n {
		if c := &t.ring[(t.start+k)%len(t.ring)]; c.Transfer == transfer && c.Index == index {
			t.pop(k + 1)
			return k + 1
		}
	}
	return 0
}

// Lost removes every chunk in flight, appends them to dst oldest first (for
// the engine to requeue on other paths) and returns the extended slice. It
// allocates only when dst lacks capacity.
func (t *Tracker) Lost(dst []Chunk) []Chunk {
	for k := range t.n {
		dst = append(dst, t.ring[(t.start+k)%len(t.ring)])
	}
	t.pop(t.n)
	return dst
}

// pop removes the k oldest chunks.
func (t *Tracker) pop(k int) {
	for range k {
		t.bytes -= t.ring[t.start].Len
		t.ring[t.start] = Chunk{}
		t.start = (t.start + 1) % len(t.ring)
	}
	t.n -= k
	if t.n == 0 {
		t.start = 0
	}
}
