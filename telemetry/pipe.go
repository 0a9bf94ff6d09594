package telemetry

import (
	"sync/atomic"
	"time"
)

// pipe is a single-producer, single-consumer ring of events of type T
// between the goroutine that records them (an engine's or a receiver
// driver's) and a builder goroutine that the pipe owns and that calls
// process for each event, in order.
//
// push copies the event into the ring: tens of nanoseconds, no allocation,
// never blocks. When the ring is full the event is dropped and counted.
//
// Waking a parked goroutine costs the waker a scheduler hand-off and, when
// the other processor is idle, a futex wake-up (an inter-processor
// interrupt: microseconds in a virtual machine). Done per event, that is
// most of telemetry's cost to the engine. So the builder does not park as
// soon as the ring is empty: while events keep coming it polls the ring
// every pollInterval on its own timer, and the producer never wakes it.
// Only after parkAfter empty polls does it park and ask the producer for a
// wake-up. The producer also kicks it when a quarter of the ring is
// backlogged, so a burst never waits out the interval.
//
// push, flush and close must be called from one goroutine at a time.
type pipe[T any] struct {
	process func(*T)
	ring    []T
	mask    uint64
	closed  bool

	_         [64]byte // keep the producer's and consumer's indices apart
	tail      atomic.Uint64
	_         [56]byte
	head      atomic.Uint64
	_         [56]byte
	headCache uint64 // producer's last view of head
	sleeping  atomic.Bool
	dropped   atomic.Int64
	wake      chan struct{}
	flushc    chan chan struct{}
	stop      chan struct{}
	done      chan struct{}
}

// Builder polling: see pipe.
const (
	pollInterval = time.Millisecond
	parkAfter    = 16
)

// newPipe returns a pipe of at least size events (rounded up to a power of
// two) and starts its builder goroutine.
func newPipe[T any](size int, process func(*T)) *pipe[T] {
	n := 1
	for n < size {
		n <<= 1
	}
	p := &pipe[T]{
		process: process,
		ring:    make([]T, n),
		mask:    uint64(n - 1),
		wake:    make(chan struct{}, 1),
		flushc:  make(chan chan struct{}),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go p.worker()
	return p
}

// push appends ev to the ring, or drops and counts it when full. Events
// pushed after close are ignored.
func (p *pipe[T]) push(ev *T) bool {
	if p.closed {
		return false
	}
	t := p.tail.Load()
	if t-p.headCache > p.mask {
		p.headCache = p.head.Load()
		if t-p.headCache > p.mask {
			p.dropped.Add(1)
			return false
		}
	}
	p.ring[t&p.mask] = *ev
	p.tail.Store(t + 1)
	if p.sleeping.Load() && p.sleeping.CompareAndSwap(true, false) {
		p.kick()
		return true
	}
	if t&255 == 0 { // the worker polls; wake it early if it is falling behind
		p.headCache = p.head.Load()
		if t-p.headCache > p.mask/4 {
			p.kick()
		}
	}
	return true
}

// kick wakes the worker if it waits; it never blocks.
func (p *pipe[T]) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// worker is the consumer: it processes ring events in order.
func (p *pipe[T]) worker() {
	defer close(p.done)
	tm := time.NewTimer(time.Hour)
	tm.Stop()
	idle := 0
	for {
		if p.drain() {
			idle = 0
		} else {
			idle++
		}
		var tick <-chan time.Time
		if idle < parkAfter {
			tm.Reset(pollInterval)
			tick = tm.C
		} else {
			p.sleeping.Store(true)
			if p.tail.Load() != p.head.Load() { // raced with a push
				p.sleeping.Store(false)
				continue
			}
		}
		select {
		case <-tick:
		case <-p.wake:
		case fc := <-p.flushc:
			p.drain()
			close(fc)
		case <-p.stop:
			p.sleeping.Store(false)
			p.drain()
			return
		}
		p.sleeping.Store(false)
		if tick == nil {
			idle = 0
		}
	}
}

// drain processes every event pushed so far and reports whether there
// were any.
func (p *pipe[T]) drain() bool {
	h := p.head.Load()
	h0 := h
	for t := p.tail.Load(); h != t; t = p.tail.Load() {
		for ; h != t; h++ {
			p.process(&p.ring[h&p.mask])
			if h&63 == 63 {
				p.head.Store(h + 1) // free space in batches
			}
		}
		p.head.Store(h)
	}
	return h != h0
}

// flush returns once every event pushed before the call has been
// processed.
func (p *pipe[T]) flush() {
	if p.closed {
		return
	}
	fc := make(chan struct{})
	p.flushc <- fc
	<-fc
}

// close pushes last (waiting for room if the ring is full: it must not be
// lost), processes everything queued and stops the worker. Later pushes
// are ignored; close is idempotent.
func (p *pipe[T]) close(last *T) {
	if p.closed {
		return
	}
	for !p.push(last) {
		p.dropped.Add(-1)
		time.Sleep(100 * time.Microsecond)
	}
	p.closed = true
	close(p.stop)
	<-p.done
}
