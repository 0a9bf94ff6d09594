package mptx

import (
	"context"
	"time"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// Telemetry is a session's telemetry hook (Config.Telemetry): it makes the
// recorders of each session's two ends. Package telemetry implements it
// with OpenTelemetry (telemetry.Sessions): spans for every transfer and
// chunk at both ends, joined into one trace through the W3C trace context
// the sender puts in each Offer, and the mptx metrics. This package does
// not import OpenTelemetry; a nil hook records nothing and costs a nil
// check per event.
type Telemetry interface {
	SendTelemetry(info SessionInfo) (SendTelemetry, error)
	RecvTelemetry(info SessionInfo) (RecvTelemetry, error)
}

// SessionInfo describes one end of a session to its recorder.
type SessionInfo struct {
	Backend string // "tcp" or "verbs"
	Peer    string // the other end's control address
	CC      string // the sender's congestion control
	Paths   []qp.PathInfo
	// Wall converts the end's vtime.Time to wall-clock time.
	Wall func(vtime.Time) time.Time
}

// SendTelemetry records a sending end: the engine's events (it is the
// engine's multipath.Recorder) and each transfer's span, begun before the
// transfer is submitted so that its trace context can travel in the Offer.
type SendTelemetry interface {
	multipath.Recorder
	// BeginTransfer starts transfer id's span and returns its W3C trace
	// context for the receiver (nil when tracing is off).
	BeginTransfer(ctx context.Context, now vtime.Time, id multipath.TransferID, name string) []byte
	// CancelTransfer ends a begun span of a transfer that never started.
	CancelTransfer(now vtime.Time, id multipath.TransferID, reason string)
	Close(now vtime.Time)
}

// RecvTelemetry records a receiving end: each transfer (joined to the
// sender's trace) and each chunk as it arrives.
type RecvTelemetry interface {
	Expect(now vtime.Time, id multipath.TransferID, bytes units.Bytes, chunks uint32, chunkSize units.Bytes, traceContext []byte) error
	// Chunk records chunk index of transfer id, whose last segment landed
	// on path at arrived (0: unknown) and was polled at polled.
	Chunk(id multipath.TransferID, index uint32, path int, bytes units.Bytes, arrived, polled vtime.Time)
	Duplicate(now vtime.Time, id multipath.TransferID, index uint32, path int)
	// Done ends transfer id's span; reason is "" on success.
	Done(now vtime.Time, id multipath.TransferID, reason string)
	Close(now vtime.Time)
}
