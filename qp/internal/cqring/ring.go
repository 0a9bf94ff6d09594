// Package cqring is the completion queue the software backends (qp/mem and
// qp/tcp) share: a FIFO ring of qp.Completion values over one slice, the
// shape of a verbs completion queue (ibv_create_cq(3)) whose entries the
// driver moves out with Poll.
//
// The ring never allocates after Init except in Grow, which its owner calls
// explicitly (qp/mem grows its virtual-time queues; qp/tcp sizes its rings
// so that they cannot overflow and treats an overflow as a bug). Push and
// Pop allocate nothing. The zero Ring has no room: call Init first.
//
// A Ring is not safe for concurrent use; its owner guards it (qp/tcp with
// its connection's mutex).
package cqring

import "github.com/mptx-dev/mptx/qp"

// Ring is a bounded FIFO of completions: buf[head] is the oldest, n are
// queued.
type Ring struct {
	buf  []qp.Completion
	head int
	n    int
}

// Init empties r and gives it room for capacity completions (>= 1).
func (r *Ring) Init(capacity int) {
	if capacity < 1 {
		panic("cqring: BUG: Init with capacity < 1")
	}
	r.buf = make([]qp.Completion, capacity)
	r.head, r.n = 0, 0
}

// Len returns the completions queued.
func (r *Ring) Len() int { return r.n }

// Cap returns the completions r can hold.
func (r *Ring) Cap() int { return len(r.buf) }

// Full reports whether Push would overflow.
func (r *Ring) Full() bool { return r.n == len(r.buf) }

// Push appends c. It panics when r is full: owners size their rings so
// that this cannot happen, or check Full and Grow first.
func (r *Ring) Push(c qp.Completion) {
	if r.n == len(r.buf) {
		panic("cqring: BUG: push to a full completion ring")
	}
	i := r.head + r.n
	if i >= len(r.buf) {
		i -= len(r.buf)
	}
	r.buf[i] = c
	r.n++
}

// Grow doubles r's capacity, keeping its completions in order. It is the
// only method that allocates.
func (r *Ring) Grow() {
	nb := make([]qp.Completion, 2*max(len(r.buf), 1))
	for i := 0; i < r.n; i++ {
		j := r.head + i
		if j >= len(r.buf) {
			j -= len(r.buf)
		}
		nb[i] = r.buf[j]
	}
	r.buf, r.head = nb, 0
}

// Pop moves up to len(dst) of the oldest completions into dst, oldest
// first, and returns how many.
func (r *Ring) Pop(dst []qp.Completion) int {
	k := min(len(dst), r.n)
	for i := 0; i < k; i++ {
		dst[i] = r.buf[r.head]
		r.head++
		if r.head == len(r.buf) {
			r.head = 0
		}
	}
	r.n -= k
	return k
}
