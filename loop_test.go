package mptx_test

import (
	"context"
	"testing"
	"time"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/vtime"
)

type countStepper struct {
	n     int
	next  time.Duration
	clock vtime.Clock
}

func (c *countStepper) Step(now vtime.Time) vtime.Time {
	c.n++
	return now.Add(c.next)
}

// TestLoopWakesAndStops: Loop steps on Wake, honours Done, and returns
// ctx.Err() when the context ends.
func TestLoopWakesAndStops(t *testing.T) {
	wake := make(chan struct{}, 1)
	s := &countStepper{next: time.Hour}
	done := false
	go func() { wake <- struct{}{} }()
	err := mptx.Loop(context.Background(), mptx.LoopConfig{Wake: wake, BusyPoll: time.Microsecond, LockOSThread: true,
		Done: func() bool { done = s.n >= 2; return done }}, s)
	if err != nil || !done || s.n < 2 {
		t.Fatalf("Loop = %v after %d steps; want nil after >= 2 (one initial, one on Wake)", err, s.n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	s2 := &countStepper{next: time.Millisecond}
	if err := mptx.Loop(ctx, mptx.LoopConfig{BusyPoll: time.Microsecond}, s2); err != context.DeadlineExceeded {
		t.Fatalf("Loop with an ending context = %v, want context.DeadlineExceeded", err)
	}
	if s2.n < 3 {
		t.Fatalf("a stepper asking to run every 1 ms ran %d times in 20 ms", s2.n)
	}
}
