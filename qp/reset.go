package qp

// Resetter is implemented by backends that can bring a path's queue pair
// back from the error state: what a verbs driver does with ibv_modify_qp(3)
// RESET → INIT → RTR → RTS on both ends, with fresh PSNs, after a transport
// error (retry exhaustion). Work requests outstanding at the error were
// already flushed. Reset of a path that is not in the error state is a
// no-op. The driver resets a path before probing it when the engine asks
// (multipath.Action.Reset); a backend without Resetter keeps an errored
// queue pair in the error state and its probes fail.
type Resetter interface {
	Reset(path int) error
}
