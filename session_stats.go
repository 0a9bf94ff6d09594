package mptx

import (
	"context"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
)

// SessionStats is a snapshot of a session's paths and driver counters, for
// summaries and monitoring (Session.Stats). The sending end fills Paths'
// engine state and the driver's counters; the receiving end fills
// Receiver.
type SessionStats struct {
	Transport Transport
	// Paths has one entry per path of the session, in path order.
	Paths []SessionPathStats
	// Resets counts queue-pair resets the sender's driver carried out
	// (fences of a stalled or lost path, resets before a probe); on TCP a
	// reset is a new TCP connection for the path. ResetErrors counts the
	// resets that failed (the path stays out of use). Sending end only.
	Resets, ResetErrors uint64
	// Receiver counts what the receiving end saw (receiving end only).
	Receiver ReceiverStats
}

// SessionPathStats is one path of a SessionStats.
type SessionPathStats struct {
	// Info describes the path as the backend set it up.
	Info qp.PathInfo
	// Engine is the sending engine's view of the path over the session's
	// life: state, bytes acknowledged, requeues, losses, RTTs (sending end
	// only; zero on the receiving end).
	Engine multipath.PathStats
	// Err is the backend's latest error on the path ("" if none): why a
	// post, a reset or a counter reading failed (sending end only).
	Err string
}

// Stats returns a snapshot of the session's paths and counters. It is
// taken on the session's loop goroutine, between two driver rounds, and
// waits for it; it fails with ctx's error, or the session's once it has
// ended. Stats is safe for concurrent use.
func (s *Session) Stats(ctx context.Context) (SessionStats, error) {
	res := make(chan SessionStats, 1)
	var ok bool
	switch {
	case s.snd != nil:
		ss := s.snd
		ok = ss.do(func() {
			st := SessionStats{Transport: s.tr}
			infos := ss.conn.Paths()
			eng := ss.snd.Engine()
			for i := 0; i < eng.NumPaths(); i++ {
				p := SessionPathStats{Engine: eng.Stats(i)}
				if i < len(infos) {
					p.Info = infos[i]
				}
				if err := ss.snd.PathError(i); err != nil {
					p.Err = err.Error()
				}
				st.Paths = append(st.Paths, p)
			}
			ds := ss.snd.Stats()
			st.Resets, st.ResetErrors = ds.Resets, ds.ResetErrors
			res <- st
		})
	case s.rcv != nil:
		rs := s.rcv
		ok = rs.do(func() {
			st := SessionStats{Transport: s.tr, Receiver: rs.rcv.Stats()}
			if p, isPather := rs.recv.(interface{ Paths() []qp.PathInfo }); isPather {
				for _, info := range p.Paths() {
					st.Paths = append(st.Paths, SessionPathStats{Info: info})
				}
			}
			res <- st
		})
	}
	if !ok {
		return SessionStats{}, s.closedErr()
	}
	select {
	case st := <-res:
		return st, nil
	case <-ctx.Done():
		return SessionStats{}, ctx.Err()
	case <-s.done:
		// The loop may still have run the snapshot before it exited.
		select {
		case st := <-res:
			return st, nil
		default:
		}
		return SessionStats{}, s.closedErr()
	}
}

// closedErr is the session's end reason, ErrSessionClosed if none is
// recorded yet.
func (s *Session) closedErr() error {
	if err := s.Err(); err != nil {
		return err
	}
	return ErrSessionClosed
}
