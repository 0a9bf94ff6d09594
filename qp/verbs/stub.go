//go:build !linux || !cgo

package verbs

import (
	"context"
	"net"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
	"github.com/mptx-dev/mptx/units"
)

// This file is the build without libibverbs (not Linux, or CGO_ENABLED=0),
// in the manner of netlink's *_unspecified.go: the same API, every entry
// point failing with an error that wraps qp.ErrNotSupported.

// Supported reports whether this build has the libibverbs binding (it does
// not).
const Supported = false

// Devices returns errNotSupported.
func Devices() ([]Device, error) { return nil, errNotSupported }

// Host is unavailable in this build; OpenHost fails.
type Host struct{}

// OpenHost returns errNotSupported.
func OpenHost(HostConfig) (*Host, error) { return nil, errNotSupported }

// NICs returns nil.
func (h *Host) NICs() []NIC { return nil }

// HugePages returns false.
func (h *Host) HugePages() bool { return false }

// PoolSize returns 0.
func (h *Host) PoolSize() units.Bytes { return 0 }

// PoolInUse returns 0.
func (h *Host) PoolInUse() units.Bytes { return 0 }

// Alloc returns errNotSupported.
func (h *Host) Alloc(units.Bytes) (*Buffer, error) { return nil, errNotSupported }

// Register returns errNotSupported.
func (h *Host) Register([]byte) (*Buffer, error) { return nil, errNotSupported }

// Dial returns errNotSupported.
func (h *Host) Dial(context.Context, string, DialConfig) (*Conn, error) {
	return nil, errNotSupported
}

// Usable returns errNotSupported.
func Usable(HostConfig) error { return errNotSupported }

// DialSession returns errNotSupported.
func (h *Host) DialSession(context.Context, *bootstrap.Mux, DialConfig) (*Conn, error) {
	return nil, errNotSupported
}

// AcceptSession returns errNotSupported.
func (h *Host) AcceptSession(context.Context, *bootstrap.Mux, *Buffer, ListenConfig) (*Receiver, error) {
	return nil, errNotSupported
}

// Listen returns errNotSupported.
func (h *Host) Listen(string, ListenConfig) (*Listener, error) { return nil, errNotSupported }

// Close does nothing.
func (h *Host) Close() error { return nil }

// Buffer is unavailable in this build.
type Buffer struct{}

// Bytes returns nil.
func (b *Buffer) Bytes() []byte { return nil }

// Len returns 0.
func (b *Buffer) Len() units.Bytes { return 0 }

// Pooled returns false.
func (b *Buffer) Pooled() bool { return false }

// NUMANode returns -1.
func (b *Buffer) NUMANode() int { return -1 }

// Free does nothing.
func (b *Buffer) Free() error { return nil }

// Listener is unavailable in this build.
type Listener struct{}

// Addr returns nil.
func (l *Listener) Addr() net.Addr { return nil }

// Rejected returns 0.
func (l *Listener) Rejected() int { return 0 }

// Accept returns errNotSupported.
func (l *Listener) Accept(context.Context) (*Receiver, error) { return nil, errNotSupported }

// Close does nothing.
func (l *Listener) Close() error { return nil }

// Conn is unavailable in this build.
type Conn struct{}

var _ qp.Conn = (*Conn)(nil)
var _ qp.RateLimiter = (*Conn)(nil)
var _ qp.Notifier = (*Conn)(nil)
var _ qp.Resetter = (*Conn)(nil)

// Paths returns nil.
func (c *Conn) Paths() []qp.PathInfo { return nil }

// PostSend returns errNotSupported.
func (c *Conn) PostSend(int, []qp.SendWR) (int, error) { return 0, errNotSupported }

// Poll returns errNotSupported.
func (c *Conn) Poll([]qp.Completion) (int, error) { return 0, errNotSupported }

// Counters returns errNotSupported.
func (c *Conn) Counters(int) (qp.Counters, error) { return qp.Counters{}, errNotSupported }

// Caps returns the zero Caps.
func (c *Conn) Caps() qp.Caps { return qp.Caps{} }

// SetRate returns errNotSupported.
func (c *Conn) SetRate(int, units.BitRate) error { return errNotSupported }

// Notify returns a closed channel.
func (c *Conn) Notify() <-chan struct{} { return closedChan }

// Region returns zeros.
func (c *Conn) Region() (uint64, units.Bytes) { return 0, 0 }

// Send returns nil.
func (c *Conn) Send() *Buffer { return nil }

// Outstanding returns 0.
func (c *Conn) Outstanding(int) int { return 0 }

// PathErr returns errNotSupported.
func (c *Conn) PathErr(int) error { return errNotSupported }

// Announce returns errNotSupported.
func (c *Conn) Announce(context.Context, *Transfer) error { return errNotSupported }

// AwaitReceipt returns errNotSupported.
func (c *Conn) AwaitReceipt(context.Context) (*Receipt, error) { return nil, errNotSupported }

// Reset returns errNotSupported.
func (c *Conn) Reset(int) error { return errNotSupported }

// Close does nothing.
func (c *Conn) Close() error { return nil }

// Receiver is unavailable in this build.
type Receiver struct{}

var _ qp.Receiver = (*Receiver)(nil)
var _ qp.Notifier = (*Receiver)(nil)

// RemoteAddr returns "".
func (r *Receiver) RemoteAddr() string { return "" }

// Offer returns nil.
func (r *Receiver) Offer() *bootstrap.Offer { return nil }

// Paths returns nil.
func (r *Receiver) Paths() []qp.PathInfo { return nil }

// Access returns AccessAuto.
func (r *Receiver) Access() Access { return AccessAuto }

// Rkey returns 0.
func (r *Receiver) Rkey(int) uint32 { return 0 }

// Region returns nil.
func (r *Receiver) Region() []byte { return nil }

// Poll returns errNotSupported.
func (r *Receiver) Poll([]qp.Completion) (int, error) { return 0, errNotSupported }

// Notify returns a closed channel.
func (r *Receiver) Notify() <-chan struct{} { return closedChan }

// Revoke does nothing.
func (r *Receiver) Revoke() error { return nil }

// Expose fails: verbs is not supported here.
func (r *Receiver) Expose([]byte, qp.Access) (qp.Exposure, error) {
	return qp.Exposure{}, errNotSupported
}

// RevokeKey fails: verbs is not supported here.
func (r *Receiver) RevokeKey(uint32) error { return errNotSupported }

// AwaitTransfer returns errNotSupported.
func (r *Receiver) AwaitTransfer(context.Context) (*Transfer, error) { return nil, errNotSupported }

// AckTransfer returns errNotSupported.
func (r *Receiver) AckTransfer(context.Context, *Transfer) error { return errNotSupported }

// SendReceipt returns errNotSupported.
func (r *Receiver) SendReceipt(context.Context, *Receipt) error { return errNotSupported }

// Close does nothing.
func (r *Receiver) Close() error { return nil }

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
