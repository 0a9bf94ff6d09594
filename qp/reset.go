package qp

// Resetter is implemented by backends that can fence a path and bring it
// back: what a verbs driver does with ibv_modify_qp(3) to the error state
// and then RESET → INIT → RTR → RTS on both ends, with fresh PSNs.
//
// Reset(path) must, whatever state the path's queue pair is in:
//
//  1. flush it: every work request outstanding on the path when Reset is
//     called completes with StatusFlushed (or, if the backend cannot
//     report it, not at all); none completes successfully afterwards;
//  2. fence it: when Reset returns nil, nothing of those work requests can
//     reach the peer any more: no byte lands in the peer's memory and no
//     immediate reaches its completion queue (the peer's queue pair
//     restarts with a fresh expected PSN, so packets still in the network
//     are discarded; a TCP backend drops the old connection's unread
//     frames);
//  3. leave the path ready for new work (a probe, then chunks).
//
// The driver calls it when the engine asks (multipath.ActReset after a
// stall, multipath.Action.Reset before probing a path lost to an error)
// and reports the outcome with Engine.OnReset: a nil return lets the
// engine write the path's outstanding work off and report the transfers
// waiting on it. A backend without Resetter leaves those transfers waiting
// until their work requests complete, which RC guarantees (successfully or
// after the transport's retries run out), and keeps an errored queue pair
// in the error state, so its probes fail.
type Resetter interface {
	Reset(path int) error
}
