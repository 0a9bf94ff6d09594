package qp

// Notifier is implemented by connections and receivers that can wake an
// idle driver instead of being polled in a loop: the verbs backend arms its
// completion queues (ibv_req_notify_cq(3)) and delivers the completion
// channel's event on the returned channel.
//
// Protocol for a driver with nothing to do:
//
//  1. ch := n.Notify() — arms the wakeup and returns its channel (the same
//     channel on every call; capacity 1).
//  2. Poll once more. Completions that arrived before arming raise no
//     event, so skipping this poll can sleep through them.
//  3. If that poll returned nothing, block on ch (and on the driver's
//     timer). A value on ch means completions may be ready; spurious
//     wakeups are possible, and a closed connection signals too, so that
//     the driver polls and sees qp.ErrClosed.
//
// Backends without such a mechanism do not implement Notifier; drivers
// then poll on their timer.
type Notifier interface {
	Notify() <-chan struct{}
}
