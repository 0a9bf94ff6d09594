package verbs

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/mptx-dev/mptx/qp"
)

// Sentinel errors. Match them with errors.Is; they are wrapped with detail.
var (
	// ErrPathDown: the path's queue pair is in the error state or its
	// port is down; the driver treats the path as lost.
	ErrPathDown = errors.New("verbs: path down")
	// ErrNoDevice: no usable RDMA device (none present, none ACTIVE, or
	// none with a RoCEv2 GID). It wraps qp.ErrNotSupported, so callers
	// that only ask "can verbs run here?" need one check.
	ErrNoDevice = fmt.Errorf("verbs: no usable RDMA device: %w", qp.ErrNotSupported)
	// ErrRevoked: the receive region's remote access was revoked.
	ErrRevoked = errors.New("verbs: receive region revoked")
)

// errNotSupported is returned by every entry point of the build without
// cgo or off Linux.
var errNotSupported = fmt.Errorf("verbs: built without cgo/libibverbs (need linux, CGO_ENABLED=1 and libibverbs-dev): %w", qp.ErrNotSupported)

// Error is a failed verbs call: the C function, its errno and, where one is
// known, a likely remedy. It unwraps to the syscall.Errno, and errno values
// that mean "the device or kernel cannot do this" (EOPNOTSUPP, ENOSYS,
// EPROTONOSUPPORT) also match qp.ErrNotSupported.
type Error struct {
	Verb   string        // the C call, e.g. "ibv_reg_mr"
	Object string        // what it was called on, e.g. "rxe0" (may be empty)
	Errno  syscall.Errno // 0 if the call failed without setting errno
	Remedy string        // a hint for the operator (may be empty)
}

// Error renders e as
// "verbs: ibv_reg_mr(rxe0): cannot allocate memory (errno 12): RLIMIT_MEMLOCK too low? ...".
func (e *Error) Error() string {
	s := "verbs: " + e.Verb
	if e.Object != "" {
		s += "(" + e.Object + ")"
	}
	if e.Errno != 0 {
		s += fmt.Sprintf(": %s (errno %d)", e.Errno.Error(), int(e.Errno))
	} else {
		s += ": failed"
	}
	if e.Remedy != "" {
		s += ": " + e.Remedy
	}
	return s
}

// Unwrap returns the errno.
func (e *Error) Unwrap() error {
	if e.Errno == 0 {
		return nil
	}
	return e.Errno
}

// Is reports whether e matches target; besides the errno it matches
// qp.ErrNotSupported for "not supported" errnos.
func (e *Error) Is(target error) bool {
	if target == qp.ErrNotSupported {
		switch e.Errno {
		case syscall.EOPNOTSUPP, syscall.ENOSYS, syscall.EPROTONOSUPPORT:
			return true
		}
	}
	return false
}

// verbError builds an *Error with the remedy known for verb and errno.
func verbError(verb, object string, errno syscall.Errno) *Error {
	return &Error{Verb: verb, Object: object, Errno: errno, Remedy: remedy(verb, errno)}
}

// remedy returns an operator hint for a failed verb, in the manner of
// cilium/ebpf's handleMapCreateError.
func remedy(verb string, errno syscall.Errno) string {
	switch verb {
	case "ibv_reg_mr", "ibv_create_cq", "ibv_create_cq_ex", "ibv_create_qp", "ibv_create_srq", "mmap":
		if errno == syscall.ENOMEM || errno == syscall.EPERM || errno == syscall.EAGAIN {
			return "RLIMIT_MEMLOCK too low? raise it with ulimit -l (or LimitMEMLOCK=infinity in the unit) or run as root"
		}
	case "ibv_open_device", "ibv_get_device_list":
		switch errno {
		case syscall.EACCES, syscall.EPERM:
			return "no permission on /dev/infiniband/uverbs*: run as root or add the user to the rdma group"
		case syscall.ENOSYS, syscall.ENODEV, syscall.ENOENT, 0:
			return "is an RDMA driver loaded (rdma_rxe, mlx5_ib) and ib_uverbs present? see `rdma link show`"
		}
	case "ibv_modify_qp(RTR)":
		switch errno {
		case syscall.EINVAL:
			return "bad address vector: check the GID index (RoCEv2 IPv4 is usually 1 on rxe), the path MTU and the peer's QPN"
		case syscall.ETIMEDOUT, syscall.ENETUNREACH, syscall.EHOSTUNREACH:
			return "no route to the peer's GID: check the netdev's address and routes"
		}
	case "ibv_modify_qp(RTS)", "ibv_modify_qp(INIT)":
		if errno == syscall.EINVAL {
			return "the device rejected a QP attribute: check timeout (0..31), retry count (0..7) and RNR retry (0..7)"
		}
	case "ibv_post_send", "ibv_post_srq_recv":
		switch errno {
		case syscall.ENOMEM:
			return "send queue full: wait for completions before posting more"
		case syscall.EINVAL:
			return "the queue pair is not in RTS (path down?) or a work request is malformed"
		}
	case "ibv_alloc_mw", "ibv_bind_mw":
		if errno == syscall.EOPNOTSUPP || errno == syscall.ENOSYS {
			return "the device has no memory windows: set ListenConfig.Access to AccessMR"
		}
	case "ibv_modify_qp_rate_limit":
		if errno == syscall.EOPNOTSUPP || errno == syscall.ENOSYS || errno == syscall.EINVAL {
			return "the device has no per-QP rate limiter (packet_pacing_caps); mptx paces in software instead"
		}
	case "ibv_req_notify_cq", "ibv_get_cq_event":
		return "the completion queue is gone (closed connection?)"
	}
	return ""
}
