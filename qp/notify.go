package qp

// Notifier is implemented by real-time backends (qp/tcp, qp/verbs) that can
// wake a sleeping driver: the channel receives a value (it is buffered, so
// a wake-up is never lost) when completions may be pending. mptx.Loop takes
// it as LoopConfig.Wake. Virtual-time backends do not implement it: their
// worlds schedule the driver's steps themselves.
type Notifier interface {
	Notify() <-chan struct{}
}
