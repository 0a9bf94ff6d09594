package sim

// Timer is a re-armable deadline owned by one element: the element's one
// pending event of a kind, in htsim's sense. Reset moves the deadline
// earlier or later in O(1) amortised without searching the event list:
// moving it later leaves the existing entry in place, and when that entry
// fires early the timer re-schedules itself at the new deadline; moving it
// earlier adds an entry, and the superseded one fires as a no-op. At any
// moment the timer has at least one entry at or before its deadline, and
// at most a few superseded ones. A stopped timer's entries do not keep
// World.Run going.
//
// The zero value is stopped but unusable until Init.
type Timer struct {
	w *World
	h Handler
	l lazy
}

// lazy is a Timer's bookkeeping without the world and handler, for
// elements that are their own handler (a Port's transmitter) and so save
// an indirect call per event.
type lazy struct {
	at   Time  // armed deadline; 0 = stopped
	maxQ Time  // time of the latest outstanding entry (valid while n > 0)
	n    int32 // outstanding entries
}

func (t *lazy) reset(w *World, h Handler, at Time) {
	if t.at == 0 {
		w.idle -= int(t.n) // its entries matter again
	}
	t.at = at
	if t.n > 0 && t.maxQ <= at {
		return // an entry at or before at exists; it will re-check
	}
	t.schedule(w, h, at)
}

func (t *lazy) resetEarlier(w *World, h Handler, at Time) {
	if t.at == 0 || at < t.at {
		t.reset(w, h, at)
	}
}

func (t *lazy) stop(w *World) {
	if t.at != 0 {
		t.at = 0
		w.idle += int(t.n)
	}
}

func (t *lazy) schedule(w *World, h Handler, at Time) {
	if t.n == 0 || at > t.maxQ {
		t.maxQ = at
	}
	t.n++
	w.At(at, h)
}

// fire accounts one of the timer's entries firing at now and reports
// whether the deadline has come (the timer is then stopped); otherwise it
// keeps an entry at or before the deadline.
func (t *lazy) fire(w *World, h Handler, now Time) bool {
	t.n--
	if t.at == 0 {
		w.idle--
		return false
	}
	if t.at <= now {
		t.at = 0
		w.idle += int(t.n)
		return true
	}
	if t.n == 0 || t.maxQ > t.at {
		t.schedule(w, h, t.at)
	}
	return false
}

// Init binds the timer to a world and to the handler it fires.
func (t *Timer) Init(w *World, h Handler) { t.w, t.h = w, h }

// Reset arms the timer for instant at (>= now), replacing any deadline.
func (t *Timer) Reset(at Time) { t.l.reset(t.w, t, at) }

// ResetEarlier arms the timer for at unless it is already armed earlier.
func (t *Timer) ResetEarlier(at Time) { t.l.resetEarlier(t.w, t, at) }

// Stop disarms the timer. Its entries stay in the event list and fire as
// no-ops; the world does not wait for them.
func (t *Timer) Stop() { t.l.stop(t.w) }

// Deadline returns the armed deadline, 0 if stopped.
func (t *Timer) Deadline() Time { return t.l.at }

// Fire implements Handler for the timer's entries: it runs the bound
// handler when the deadline has come.
func (t *Timer) Fire(now Time) {
	if t.l.fire(t.w, t, now) {
		t.h.Fire(now)
	}
}
