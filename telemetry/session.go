package telemetry

import (
	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// Sessions is the OpenTelemetry hook of mptx sessions (mptx.Config's
// Telemetry): every session end gets a Recorder (sender) or a
// ReceiveRecorder (receiver) on t's providers, so a session's transfers
// appear as one trace with both services' spans, and its metrics are
// recorded. Make t with Setup; Shutdown it after the sessions closed.
type Sessions struct {
	T *Telemetry
}

var _ mptx.Telemetry = Sessions{}

func attrsOf(paths []qp.PathInfo) []PathAttr {
	a := make([]PathAttr, len(paths))
	for i, p := range paths {
		a[i] = PathAttr{Device: p.Device, QPN: p.QPN}
	}
	return a
}

// SendTelemetry implements mptx.Telemetry.
func (s Sessions) SendTelemetry(info mptx.SessionInfo) (mptx.SendTelemetry, error) {
	return NewRecorder(Config{TracerProvider: s.T.TracerProvider, MeterProvider: s.T.MeterProvider, Wall: info.Wall,
		CC: info.CC, Backend: info.Backend, Peer: info.Peer, Paths: attrsOf(info.Paths)})
}

// RecvTelemetry implements mptx.Telemetry.
func (s Sessions) RecvTelemetry(info mptx.SessionInfo) (mptx.RecvTelemetry, error) {
	r, err := NewReceiveRecorder(ReceiveConfig{TracerProvider: s.T.TracerProvider, MeterProvider: s.T.MeterProvider, Wall: info.Wall,
		Backend: info.Backend, Peer: info.Peer, Paths: attrsOf(info.Paths)})
	if err != nil {
		return nil, err
	}
	return &sessionRecv{r: r}, nil
}

// sessionRecv adapts a ReceiveRecorder to mptx.RecvTelemetry.
type sessionRecv struct {
	r *ReceiveRecorder
	c RecvChunk // reused: Chunk copies what it keeps
}

func (s *sessionRecv) Expect(now vtime.Time, id multipath.TransferID, bytes units.Bytes, chunks uint32, chunkSize units.Bytes, tc []byte) error {
	return s.r.Expect(now, id, bytes, chunks, chunkSize, tc)
}

func (s *sessionRecv) Chunk(id multipath.TransferID, index uint32, path int, bytes units.Bytes, arrived, polled vtime.Time) {
	s.c = RecvChunk{Transfer: id, Index: index, Path: path, Bytes: bytes, Arrived: arrived, Polled: polled}
	s.r.Chunk(&s.c)
}

func (s *sessionRecv) Duplicate(now vtime.Time, id multipath.TransferID, index uint32, path int) {
	s.r.Duplicate(now, id, index, path)
}

func (s *sessionRecv) Done(now vtime.Time, id multipath.TransferID, reason string) {
	s.r.Done(now, id, reason)
}

func (s *sessionRecv) Close(now vtime.Time) { s.r.Close(now) }
