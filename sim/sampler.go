package sim

import "github.com/mptx-dev/mptx/units"

// Sampler calls a function periodically in virtual time. It is a daemon:
// it stops by itself once nothing but daemons is left in the event list, so
// a world with samplers still runs to completion.
//
// The zero value is not usable; call NewSampler.
type Sampler struct {
	w       *World
	every   Time
	fn      func(now Time)
	stopped bool
}

// NewSampler calls fn every period, the first time one period from now.
func NewSampler(w *World, every Time, fn func(now Time)) *Sampler {
	if every <= 0 {
		panic("sim: BUG: NewSampler with a non-positive period")
	}
	s := &Sampler{w: w, every: every, fn: fn}
	w.daemons++
	w.At(w.now+every, s)
	return s
}

// Stop stops the sampler.
func (s *Sampler) Stop() { s.stopped = true }

// SetEvery changes the period from the next sample on (the one already
// scheduled keeps its time). Samplers that bound their memory double it
// as a run grows long.
func (s *Sampler) SetEvery(every Time) {
	if every <= 0 {
		panic("sim: BUG: Sampler.SetEvery with a non-positive period")
	}
	s.every = every
}

// Fire implements Handler.
func (s *Sampler) Fire(now Time) {
	if s.stopped || s.w.q.len() <= s.w.daemons-1+s.w.idle {
		s.w.daemons--
		return
	}
	s.fn(now)
	s.w.At(now+s.every, s)
}

// QueueSeries is a sampled time series of ports' data-queue lengths.
type QueueSeries struct {
	Ports []*Port
	T     []Time          // sample instants
	Q     [][]units.Bytes // Q[i][k]: queue of Ports[i] at T[k]
	s     *Sampler
}

// SampleQueues records the queue length of each port every period.
func SampleQueues(w *World, every Time, ports ...*Port) *QueueSeries {
	qs := &QueueSeries{Ports: ports, Q: make([][]units.Bytes, len(ports))}
	qs.s = NewSampler(w, every, func(now Time) {
		qs.T = append(qs.T, now)
		for i, p := range qs.Ports {
			qs.Q[i] = append(qs.Q[i], units.Bytes(p.qBytes))
		}
	})
	return qs
}

// Stop stops sampling.
func (qs *QueueSeries) Stop() { qs.s.Stop() }
