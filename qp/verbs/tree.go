package verbs

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
)

// The ownership tree (pyverbs' base.pyx close_weakrefs): every verbs object
// is a node whose parent cannot be destroyed while it lives:
//
//	host
//	├── pool (mmap; unmapped last)
//	└── device context (ibv_open_device)
//	    └── PD (ibv_alloc_pd)
//	        ├── MR: the pool's, user buffers' (ibv_reg_mr)
//	        └── connection (one per Conn or Receiver on this NIC)
//	            ├── the connection's own PD (receiver with AccessMR; ibv_alloc_pd)
//	            ├── completion channel (ibv_create_comp_channel)
//	            ├── CQ (ibv_create_cq, ibv_create_cq_ex)
//	            ├── control CQ and SRQ (receiver; ibv_create_srq)
//	            ├── completion watcher (stops before the CQ goes)
//	            ├── QPs (ibv_create_qp)
//	            └── MWs or the region's MR (receiver; ibv_alloc_mw, ibv_reg_mr)
//
// Closing a node closes its live children first, newest first, then
// destroys the node itself; closing twice is a no-op. A connection's
// children are created in dependency order (a CQ before the QPs that use
// it), so newest-first is also the order verbs requires: windows, QPs,
// SRQ, CQs, channel. The CQ is not the PD's child in verbs terms, but
// hanging it there orders its destruction before the PD's and the
// context's, which is all the tree must guarantee.
//
// Safety net: each Go wrapper gets a runtime.AddCleanup. If a wrapper
// becomes unreachable without Close, the cleanup reports a Leak (kind,
// name and the stack that created it) and destroys the node's subtree. The
// cleanup's argument is the node, which never points back at the wrapper.

// node is one object of the tree. Its fields are guarded by treeMu.
type node struct {
	kind     string       // "PD", "QP", ...
	name     string       // device name, QPN, ...
	parent   *node        // nil for roots
	children []*node      // live children in creation order
	destroy  func() error // frees the C object; captures only C pointers
	closed   bool
	err      error     // destroy's result, returned again by later closes
	pcs      []uintptr // creation stack
}

var (
	treeMu sync.Mutex
	live   = map[*node]struct{}{} // every unclosed node, for leak checks
	leaks  []Leak
	// leakHook, if set, receives every leak instead of standard error.
	leakHook func(Leak)
)

// Leak describes a verbs object that was garbage-collected without Close.
type Leak struct {
	Kind  string // "QP", "MR", ...
	Name  string
	Stack string // where it was created
}

func (l Leak) String() string {
	return fmt.Sprintf("verbs: leaked %s %s (never closed), created at:\n%s", l.Kind, l.Name, l.Stack)
}

// Leaks returns the leaks reported so far in this process.
func Leaks() []Leak {
	treeMu.Lock()
	defer treeMu.Unlock()
	return append([]Leak(nil), leaks...)
}

// newNode adds a node under parent (nil for a root). destroy runs at most
// once, after every child is closed.
func newNode(parent *node, kind, name string, destroy func() error) *node {
	n := &node{kind: kind, name: name, parent: parent, destroy: destroy}
	pcs := make([]uintptr, 32)
	n.pcs = pcs[:runtime.Callers(2, pcs)]
	treeMu.Lock()
	defer treeMu.Unlock()
	if parent != nil {
		if parent.closed {
			panic(fmt.Sprintf("verbs: BUG: new %s under closed %s %s", kind, parent.kind, parent.name))
		}
		parent.children = append(parent.children, n)
	}
	live[n] = struct{}{}
	return n
}

// close closes n's subtree. It is idempotent.
func (n *node) close() error {
	treeMu.Lock()
	defer treeMu.Unlock()
	return n.closeLocked()
}

func (n *node) closeLocked() error {
	if n.closed {
		return n.err
	}
	var errs []error
	for i := len(n.children) - 1; i >= 0; i-- {
		if err := n.children[i].closeLocked(); err != nil {
			errs = append(errs, err)
		}
	}
	n.children = nil
	if n.destroy != nil {
		if err := n.destroy(); err != nil {
			errs = append(errs, err)
		}
	}
	n.closed = true
	delete(live, n)
	if p := n.parent; p != nil && !p.closed {
		for i, c := range p.children {
			if c == n {
				p.children = append(p.children[:i], p.children[i+1:]...)
				break
			}
		}
	}
	n.err = errors.Join(errs...)
	return n.err
}

// isClosed reports whether n was closed.
func (n *node) isClosed() bool {
	treeMu.Lock()
	defer treeMu.Unlock()
	return n.closed
}

func (n *node) stack() string {
	var b strings.Builder
	frames := runtime.CallersFrames(n.pcs)
	for {
		f, more := frames.Next()
		fmt.Fprintf(&b, "\t%s\n\t\t%s:%d\n", f.Function, f.File, f.Line)
		if !more {
			break
		}
	}
	return b.String()
}

// track attaches the leak safety net to wrapper w, which owns n.
func track[T any](w *T, n *node) runtime.Cleanup {
	return runtime.AddCleanup(w, leaked, n)
}

// leaked runs when an unclosed wrapper was collected.
func leaked(n *node) {
	treeMu.Lock()
	if n.closed {
		treeMu.Unlock()
		return
	}
	l := Leak{Kind: n.kind, Name: n.name, Stack: n.stack()}
	leaks = append(leaks, l)
	_ = n.closeLocked()
	hook := leakHook
	treeMu.Unlock()
	if hook != nil {
		hook(l)
		return
	}
	fmt.Fprintln(os.Stderr, l.String())
}

// liveObjects lists every unclosed object with its creation stack; tests
// call it at the end to catch leaks deterministically (no GC needed).
func liveObjects() []Leak {
	treeMu.Lock()
	defer treeMu.Unlock()
	var out []Leak
	for n := range live {
		out = append(out, Leak{Kind: n.kind, Name: n.name, Stack: n.stack()})
	}
	return out
}
