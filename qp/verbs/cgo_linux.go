//go:build linux && cgo

package verbs

/*
#cgo LDFLAGS: -libverbs
#cgo noescape mptx_post_send
#cgo nocallback mptx_post_send
#cgo noescape mptx_poll
#cgo nocallback mptx_poll
#cgo noescape mptx_arm
#cgo nocallback mptx_arm
#cgo noescape mptx_drain_cq_events
#cgo nocallback mptx_drain_cq_events
#cgo nocallback mptx_get_async
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Supported reports whether this build has the libibverbs binding (it does:
// linux with cgo). Whether a device exists is another matter; see Devices.
const Supported = true

// errnoOf extracts the errno of a failed cgo call.
func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// callErr turns a verbs return code (a positive errno, as the shim
// returns) into an *Error, nil for 0.
func callErr(verb, object string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	e := syscall.Errno(rc)
	if rc < 0 {
		e = syscall.Errno(-rc)
	}
	return verbError(verb, object, e)
}

// nilErr builds the *Error of a verb that returned NULL, from errno.
func nilErr(verb, object string, err error) error {
	return verbError(verb, object, errnoOf(err))
}

// cAlloc returns n zeroed bytes of C memory; it panics when calloc fails
// (as Go's own allocator does). Free it with C.free.
func cAlloc(n uintptr) unsafe.Pointer {
	p := C.calloc(1, C.size_t(n))
	if p == nil {
		panic(fmt.Sprintf("verbs: calloc(%d) failed", n))
	}
	return p
}

func cFree(p unsafe.Pointer) { C.free(p) }

// fdWatcher waits for a libibverbs file descriptor (a completion channel
// or a device's async-event fd) to become readable through Go's network
// poller: no thread blocks in C and Close returns promptly. It watches a
// dup of the fd, so closing it never closes libibverbs' descriptor; the
// original is switched to O_NONBLOCK (shared by the dup), which the
// non-blocking ibv_get_cq_event / ibv_get_async_event calls rely on.
type fdWatcher struct {
	f    *os.File
	done chan struct{}
}

// watchFD calls onReady on its own goroutine each time fd is readable.
// onReady must consume everything (until EAGAIN).
func watchFD(fd int, name string, onReady func()) (*fdWatcher, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("verbs: %s: set O_NONBLOCK: %w", name, err)
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("verbs: %s: dup: %w", name, err)
	}
	f := os.NewFile(uintptr(dup), name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("verbs: %s: %w", name, err)
	}
	w := &fdWatcher{f: f, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			// Read waits for readability (netpoller) and calls the
			// function; returning false asks it to wait again. It
			// returns only when the file is closed.
			if err := rc.Read(func(uintptr) bool { onReady(); return false }); err != nil {
				return
			}
		}
	}()
	return w, nil
}

// stop closes the watcher's fd and waits for its goroutine to exit. It is
// idempotent.
func (w *fdWatcher) stop() {
	if w == nil {
		return
	}
	w.f.Close()
	<-w.done
}

// notifier is the wakeup half of qp.Notifier shared by Conn and Receiver:
// one buffered channel fed by a completion-channel watcher per NIC.
//
// The CQs stay armed: each watcher, on an event, acknowledges it
// (ibv_get_cq_event(3), ibv_ack_cq_events(3)), re-arms its CQ
// (ibv_req_notify_cq(3)) and only then signals. A completion that arrives
// before the re-arm is therefore seen by the poll the signal triggers, and
// one that arrives after it raises the next event: no wakeup is lost, and
// a driver may keep the channel from one Notify call for good (as
// mptx.LoopConfig.Wake does). The price is one event per arm while
// completions flow, handled off the polling goroutine.
type notifier struct {
	ch       chan struct{}
	watchers []*fdWatcher
	once     sync.Once
}

func newNotifier() *notifier { return &notifier{ch: make(chan struct{}, 1)} }

func (n *notifier) signal() {
	select {
	case n.ch <- struct{}{}:
	default:
	}
}

// watch adds a completion channel (ibv_create_comp_channel(3)) serving cq
// to n and arms cq.
func (n *notifier) watch(ch *C.struct_ibv_comp_channel, cq *C.struct_ibv_cq, name string) error {
	w, err := watchFD(int(ch.fd), name, func() {
		if C.mptx_drain_cq_events(ch) > 0 {
			C.ibv_req_notify_cq(cq, 0)
			n.signal()
		}
	})
	if err != nil {
		return err
	}
	n.watchers = append(n.watchers, w)
	if rc := C.ibv_req_notify_cq(cq, 0); rc != 0 {
		return callErr("ibv_req_notify_cq", name, rc)
	}
	return nil
}

func (n *notifier) stop() {
	n.once.Do(func() {
		for _, w := range n.watchers {
			w.stop()
		}
	})
}

// arm re-arms every CQ of set (ibv_req_notify_cq(3), solicited_only = 0)
// and returns the wakeup channel. On failure it signals, so the driver
// polls and meets the error there rather than sleeping forever.
func (n *notifier) arm(set *C.struct_mptx_cqset) <-chan struct{} {
	if C.mptx_arm(set) != 0 {
		n.signal()
	}
	return n.ch
}
