package mptx

import (
	"context"
	"runtime"
	"time"

	"github.com/mptx-dev/mptx/vtime"
)

// Stepper is a driver stepped by time: Sender, Receiver, or anything that
// polls, acts and returns its next deadline (0: none).
type Stepper interface {
	Step(now vtime.Time) vtime.Time
}

// LoopConfig configures Loop.
type LoopConfig struct {
	// Clock supplies now; nil means a vtime.Monotonic started by Loop.
	Clock vtime.Clock
	// Wake, if set, receives a value when completions may be pending (a
	// completion-channel event); Loop then sleeps until the deadline or
	// Wake instead of polling every PollInterval.
	Wake <-chan struct{}
	// BusyPoll is how long Loop keeps spinning after the last step before
	// it sleeps; 0 means 50 µs.
	BusyPoll time.Duration
	// PollInterval caps each sleep when Wake is nil; 0 means 100 µs.
	PollInterval time.Duration
	// Done, if set, is checked after every round; Loop returns nil when
	// it reports true.
	Done func() bool
	// LockOSThread pins the loop to its OS thread for its lifetime (a
	// completion-polling loop should not migrate between threads while it
	// busy-polls a NIC's completion queue).
	LockOSThread bool
}

// Loop drives steppers in real time: each round reads the clock once, steps
// every stepper with that now, then spins briefly (completions usually
// follow posts within microseconds) and finally sleeps until the earliest
// deadline, a Wake signal, or PollInterval. It returns ctx.Err() when ctx
// ends or nil when cfg.Done reports true. Loop must run on the goroutine
// that owns the steppers.
func Loop(ctx context.Context, cfg LoopConfig, steppers ...Stepper) error {
	if cfg.LockOSThread {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	clock := cfg.Clock
	if clock == nil {
		clock = vtime.NewMonotonic()
	}
	if cfg.BusyPoll == 0 {
		cfg.BusyPoll = 50 * time.Microsecond
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 100 * time.Microsecond
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	lastBusy := clock.Now()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		now := clock.Now()
		var next vtime.Time
		for _, s := range steppers {
			next = vtime.Earliest(next, s.Step(now))
		}
		if cfg.Done != nil && cfg.Done() {
			return nil
		}
		now = clock.Now()
		if next != 0 && next <= now {
			lastBusy = now
			continue
		}
		if now.Sub(lastBusy) < cfg.BusyPoll {
			runtime.Gosched()
			continue
		}
		sleep := cfg.PollInterval
		if cfg.Wake != nil {
			sleep = time.Hour
		}
		if next != 0 {
			sleep = min(sleep, next.Sub(now))
		}
		timer.Reset(sleep)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-cfg.Wake:
			lastBusy = clock.Now()
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}
