package sim

// Timer is a re-armable deadline owned by one element: the element's one
// pending event of a kind, in htsim's sense. Reset moves the deadline
// earlier or later in O(1) amortised without searching the event list:
// moving it later leaves the existing heap entry in place, and when that
// entry fires early the timer re-schedules itself at the new deadline;
// moving it earlier adds an entry, and the superseded one fires as a no-op.
// At any moment the timer has at least one heap entry at or before its
// deadline, and at most a few superseded ones.
//
// The zero value is stopped but unusable until Init.
type Timer struct {
	w    *World
	h    Handler
	at   Time  // armed deadline; 0 = stopped
	maxQ Time  // time of the latest outstanding heap entry (valid while n > 0)
	n    int32 // outstanding heap entries
}

// Init binds the timer to a world and to the handler it fires.
func (t *Timer) Init(w *World, h Handler) { t.w, t.h = w, h }

// Reset arms the timer for instant at (>= now), replacing any deadline.
func (t *Timer) Reset(at Time) {
	if t.at == 0 {
		t.w.idle -= int(t.n) // its entries matter again
	}
	t.at = at
	if t.n > 0 && t.maxQ <= at {
		return // an entry at or before at exists; it will re-check
	}
	t.schedule(at)
}

// ResetEarlier arms the timer for at unless it is already armed earlier.
func (t *Timer) ResetEarlier(at Time) {
	if t.at == 0 || at < t.at {
		t.Reset(at)
	}
}

// Stop disarms the timer. Its heap entries stay and fire as no-ops; the
// world does not wait for them (World.Run returns when only such entries
// are left).
func (t *Timer) Stop() {
	if t.at != 0 {
		t.at = 0
		t.w.idle += int(t.n)
	}
}

// Deadline returns the armed deadline, 0 if stopped.
func (t *Timer) Deadline() Time { return t.at }

func (t *Timer) schedule(at Time) {
	if t.n == 0 || at > t.maxQ {
		t.maxQ = at
	}
	t.n++
	t.w.At(at, t)
}

// Fire implements Handler for the timer's heap entries: it runs the bound
// handler when the deadline has come and otherwise keeps one entry at or
// before the deadline.
func (t *Timer) Fire(now Time) {
	t.n--
	if t.at == 0 {
		t.w.idle--
		return
	}
	if t.at <= now {
		t.at = 0
		t.w.idle += int(t.n)
		t.h.Fire(now)
		return
	}
	if t.n == 0 || t.maxQ > t.at {
		t.schedule(t.at)
	}
}
