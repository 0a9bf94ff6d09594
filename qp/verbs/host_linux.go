//go:build linux && cgo

package verbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mptx-dev/mptx/units"
)

// Host is this machine's RDMA side: the opened NICs (device context and
// protection domain each), the memory pool registered once with every NIC,
// and the connections made through them. Open it once per process with
// OpenHost and Close it last: Close tears down every connection, window,
// region and queue still open, children first.
//
// A Host is safe for concurrent use by the goroutines that Dial, Listen,
// Alloc and Register; each Conn and Receiver it returns has one owner.
type Host struct {
	cfg     HostConfig
	root    *node
	nics    []*nic
	pool    []byte // the registered pool (mmap)
	huge    bool   // pool on hugetlb pages
	alloc   *allocator
	mu      sync.Mutex
	closed  bool
	open    map[any]func() error // live Conns and Receivers, closed first by Close
	cleanup runtime.Cleanup
}

// track registers a connection's Close with the host; it returns false if
// the host is already closed.
func (h *Host) trackConn(key any, close func() error) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	if h.open == nil {
		h.open = map[any]func() error{}
	}
	h.open[key] = close
	return true
}

func (h *Host) untrackConn(key any) {
	h.mu.Lock()
	delete(h.open, key)
	h.mu.Unlock()
}

// nic is one opened device port.
type nic struct {
	idx      int
	dev      Device
	port     Port
	gid      GID
	ctx      *C.struct_ibv_context
	ctxNode  *node
	pd       *C.struct_ibv_pd
	pdNode   *node
	poolMR   *C.struct_ibv_mr
	mwAccess bool // the pool MR allows memory-window binds
	counters *portCounters
	async    *fdWatcher

	portDown atomic.Pointer[error] // non-nil while the port is not ACTIVE
	qps      sync.Map              // uint32 QPN → *health, for async QP events
}

// health is a path's state as seen by the async-event watcher and the
// completion path: nil error while usable.
type health struct{ err atomic.Pointer[error] }

// fail marks the path down with err; the first reason wins.
func (h *health) fail(err error) { h.err.CompareAndSwap(nil, &err) }

// clear marks the path up again (after a reset).
func (h *health) clear() { h.err.Store(nil) }

// failed returns the reason the path is down, nil while it is up.
func (h *health) failed() error {
	if p := h.err.Load(); p != nil {
		return *p
	}
	return nil
}

// OpenHost opens the NICs cfg names (or every ACTIVE RoCE port), allocates
// a protection domain on each (ibv_alloc_pd(3)), maps the memory pool
// (hugetlb pages when available, mmap(2)) and registers it once with every
// NIC (ibv_reg_mr(3), local write and memory-window bind only: the pool
// itself grants no remote access). Without a usable device it returns an
// error wrapping ErrNoDevice (and so qp.ErrNotSupported).
func OpenHost(cfg HostConfig) (*Host, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	devs, err := Devices()
	if err != nil {
		return nil, err
	}
	choices, err := chooseNICs(devs, cfg.Devices, cfg.GIDIndex)
	if err != nil {
		return nil, err
	}
	h := &Host{cfg: cfg}
	h.root = newNode(nil, "host", "", nil)
	ok := false
	defer func() {
		if !ok {
			_ = h.root.close()
		}
	}()
	if err := h.mapPool(); err != nil {
		return nil, err
	}
	for i, c := range choices {
		n, err := h.openNIC(i, c)
		if err != nil {
			return nil, err
		}
		h.nics = append(h.nics, n)
	}
	h.cleanup = track(h, h.root)
	ok = true
	return h, nil
}

// mapPool maps the pool memory; its node (munmap) is the root's first
// child, so it is unmapped after every NIC deregistered it.
func (h *Host) mapPool() error {
	size := int64(h.cfg.PoolSize)
	const huge = 2 << 20
	var mem []byte
	var err error
	if h.cfg.HugePages != HugeNever {
		hs := (size + huge - 1) &^ (huge - 1)
		mem, err = unix.Mmap(-1, 0, int(hs), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_HUGETLB|unix.MAP_POPULATE)
		if err == nil {
			h.huge = true
		} else if h.cfg.HugePages == HugeRequire {
			return &Error{Verb: "mmap", Object: "MAP_HUGETLB " + units.Bytes(hs).String(), Errno: errnoOf(err),
				Remedy: "reserve hugepages: echo N > /proc/sys/vm/nr_hugepages (2 MiB each)"}
		}
	}
	if mem == nil {
		ps := int64(unix.Getpagesize())
		size = (size + ps - 1) &^ (ps - 1)
		mem, err = unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return verbError("mmap", units.Bytes(size).String(), errnoOf(err))
		}
		_ = unix.Madvise(mem, unix.MADV_HUGEPAGE) // best effort (transparent hugepages)
	}
	h.pool = mem
	h.alloc = newAllocator(int64(len(mem)), 4096)
	newNode(h.root, "pool", units.Bytes(len(mem)).String(), func() error {
		if err := unix.Munmap(mem); err != nil {
			return fmt.Errorf("verbs: munmap pool: %w", err)
		}
		return nil
	})
	return nil
}

// openNIC opens one device port: context, async-event watcher, PD, the
// pool's MR and the port's counters.
func (h *Host) openNIC(idx int, c nicChoice) (*nic, error) {
	n := &nic{idx: idx, dev: c.Dev, port: c.Port, gid: c.GID}
	var cnt C.int
	list, err := C.ibv_get_device_list(&cnt)
	if list == nil {
		return nil, nilErr("ibv_get_device_list", "", err)
	}
	var dev *C.struct_ibv_device
	for i := 0; i < int(cnt); i++ {
		d := C.mptx_dev_at(list, C.int(i))
		if C.GoString(C.ibv_get_device_name(d)) == c.Dev.Name {
			dev = d
		}
	}
	if dev == nil {
		C.ibv_free_device_list(list)
		return nil, fmt.Errorf("%w: device %s vanished", ErrNoDevice, c.Dev.Name)
	}
	ctx, err := C.ibv_open_device(dev)
	C.ibv_free_device_list(list)
	if ctx == nil {
		return nil, nilErr("ibv_open_device", c.Dev.Name, err)
	}
	n.ctx = ctx
	name := c.Dev.Name + ":" + strconv.Itoa(c.Port.Num)
	n.ctxNode = newNode(h.root, "device context", name, func() error {
		n.async.stop()
		if n.counters != nil {
			n.counters.close()
		}
		if rc := C.ibv_close_device(ctx); rc != 0 {
			return verbError("ibv_close_device", name, syscall.EIO)
		}
		return nil
	})
	// Async events: port up/down and QP errors (ibv_get_async_event(3)).
	w, err := watchFD(int(ctx.async_fd), name+" async events", func() { n.drainAsync() })
	if err != nil {
		return nil, err
	}
	n.async = w
	if !c.Port.Active() {
		e := fmt.Errorf("%w: %s port is %s", ErrPathDown, name, c.Port.State)
		n.portDown.Store(&e)
	}
	pd, err := C.ibv_alloc_pd(ctx)
	if pd == nil {
		return nil, nilErr("ibv_alloc_pd", name, err)
	}
	n.pd = pd
	n.pdNode = newNode(n.ctxNode, "PD", name, func() error {
		if rc := C.ibv_dealloc_pd(pd); rc != 0 {
			return callErr("ibv_dealloc_pd", name, rc)
		}
		return nil
	})
	access := C.IBV_ACCESS_LOCAL_WRITE
	if c.Dev.Caps.MemoryWindow || c.Dev.Caps.MemoryWindowType2 {
		access |= C.IBV_ACCESS_MW_BIND
		n.mwAccess = true
	}
	mr, _, err := regMR(n.pdNode, pd, unsafe.Pointer(&h.pool[0]), len(h.pool), access, name+" pool")
	if err != nil {
		return nil, err
	}
	n.poolMR = mr
	if n.counters, err = openPortCounters(c.Dev.Name, c.Port.Num); err != nil {
		return nil, err
	}
	return n, nil
}

// regMR registers [addr, addr+len) with pd (ibv_reg_mr(3)) under parent.
func regMR(parent *node, pd *C.struct_ibv_pd, addr unsafe.Pointer, length, access int, name string) (*C.struct_ibv_mr, *node, error) {
	mr, err := C.mptx_reg_mr(pd, addr, C.size_t(length), C.int(access))
	if mr == nil {
		return nil, nil, nilErr("ibv_reg_mr", name, err)
	}
	nd := newNode(parent, "MR", name, func() error {
		if rc := C.ibv_dereg_mr(mr); rc != 0 {
			return callErr("ibv_dereg_mr", name, rc)
		}
		return nil
	})
	return mr, nd, nil
}

// drainAsync consumes the device's async events (ibv_get_async_event(3),
// each acknowledged at once) and marks ports and QPs down or up.
func (n *nic) drainAsync() {
	var ev C.struct_mptx_async
	for C.mptx_get_async(n.ctx, &ev) > 0 {
		switch ev._type {
		case C.IBV_EVENT_PORT_ERR:
			if int(ev.port) == n.port.Num {
				e := fmt.Errorf("%w: %s port %d went down (IBV_EVENT_PORT_ERR)", ErrPathDown, n.dev.Name, n.port.Num)
				n.portDown.Store(&e)
			}
		case C.IBV_EVENT_PORT_ACTIVE:
			if int(ev.port) == n.port.Num {
				n.portDown.Store(nil)
			}
		case C.IBV_EVENT_QP_FATAL, C.IBV_EVENT_QP_REQ_ERR, C.IBV_EVENT_QP_ACCESS_ERR:
			if v, ok := n.qps.Load(uint32(ev.qpn)); ok {
				v.(*health).fail(fmt.Errorf("%w: QP %#x on %s: %s", ErrPathDown, uint32(ev.qpn), n.dev.Name,
					C.GoString(C.ibv_event_type_str(uint32(ev._type)))))
			}
		}
	}
}

// NICs returns the opened NICs as enumerated devices with the port and GID
// in use.
func (h *Host) NICs() []NIC {
	out := make([]NIC, len(h.nics))
	for i, n := range h.nics {
		out[i] = NIC{Device: n.dev, Port: n.port, GID: n.gid}
	}
	return out
}

// HugePages reports whether the pool sits on hugetlb pages.
func (h *Host) HugePages() bool { return h.huge }

// PoolSize returns the pool's size.
func (h *Host) PoolSize() units.Bytes { return units.Bytes(len(h.pool)) }

// PoolInUse returns the bytes of the pool currently allocated.
func (h *Host) PoolInUse() units.Bytes { return units.Bytes(h.alloc.inUse()) }

func (h *Host) checkOpen() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return fmt.Errorf("verbs: host is closed")
	}
	return nil
}

// Close closes every connection and receiver still open (their Close, so
// that later calls on them report qp.ErrClosed), then every region and NIC,
// children first, and unmaps the pool. It is idempotent. It must not run
// while a driver is still using one of the host's connections. Buffers
// from Alloc are invalid after it.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	open := h.open
	h.open = nil
	h.mu.Unlock()
	var errs []error
	for _, c := range open {
		errs = append(errs, c())
	}
	h.cleanup.Stop()
	errs = append(errs, h.root.close())
	return errors.Join(errs...)
}

// Buffer is registered memory: a range of the host's pool (Host.Alloc) or
// a user buffer registered once with every NIC (Host.Register). SendWR
// offsets and receive regions refer to Buffers; nothing is registered per
// transfer. The zero Buffer is not usable. Free must not race with
// transfers using the buffer.
type Buffer struct {
	h       *Host
	mem     []byte
	off     int64              // pool offset; -1 for registered user memory
	mrs     []*C.struct_ibv_mr // per NIC: the MR covering mem
	mrNodes []*node            // user memory: its own MRs
	freed   atomic.Bool
	cleanup runtime.Cleanup
}

// Alloc returns size bytes of the registered pool, 4 KiB aligned. The
// bytes hold whatever their previous user left (zeros on first use).
func (h *Host) Alloc(size units.Bytes) (*Buffer, error) {
	if err := h.checkOpen(); err != nil {
		return nil, err
	}
	off, err := h.alloc.alloc(int64(size))
	if err != nil {
		return nil, err
	}
	b := &Buffer{h: h, mem: h.pool[off : off+int64(size) : off+int64(size)], off: off}
	for _, n := range h.nics {
		b.mrs = append(b.mrs, n.poolMR)
	}
	return b, nil
}

// Register registers mem, the caller's memory, with every NIC once
// (ibv_reg_mr(3), local write and memory-window bind). mem must not be Go
// heap memory (cgo pointer rules: the NIC would write where the garbage
// collector does not expect it): map it with mmap(2) (unix.Mmap with
// MAP_ANONYMOUS, or a file) or use C memory. The Buffer does not own mem;
// Free deregisters it.
func (h *Host) Register(mem []byte) (*Buffer, error) {
	if err := h.checkOpen(); err != nil {
		return nil, err
	}
	if len(mem) == 0 {
		return nil, fmt.Errorf("verbs: Register: empty buffer")
	}
	b := &Buffer{h: h, mem: mem, off: -1}
	for _, n := range h.nics {
		access := C.IBV_ACCESS_LOCAL_WRITE
		if n.mwAccess {
			access |= C.IBV_ACCESS_MW_BIND
		}
		mr, nd, err := regMR(n.pdNode, n.pd, unsafe.Pointer(&mem[0]), len(mem), access, n.dev.Name+" user buffer")
		if err != nil {
			for _, x := range b.mrNodes {
				_ = x.close()
			}
			return nil, err
		}
		b.mrs = append(b.mrs, mr)
		b.mrNodes = append(b.mrNodes, nd)
	}
	b.cleanup = runtime.AddCleanup(b, leakedAll, b.mrNodes)
	return b, nil
}

// leakedAll reports and closes several nodes owned by one wrapper.
func leakedAll(ns []*node) {
	for _, n := range ns {
		leaked(n)
	}
}

// Bytes returns the buffer's memory. It is valid until Free (and, for
// pool buffers, Host.Close).
func (b *Buffer) Bytes() []byte { return b.mem }

// Len returns the buffer's size.
func (b *Buffer) Len() units.Bytes { return units.Bytes(len(b.mem)) }

// Pooled reports whether the buffer came from the host's pool.
func (b *Buffer) Pooled() bool { return b.off >= 0 }

// addr returns the buffer's virtual address.
func (b *Buffer) addr() uint64 { return uint64(uintptr(unsafe.Pointer(&b.mem[0]))) }

// lkey returns the local key of the buffer's MR on NIC i.
func (b *Buffer) lkey(i int) uint32 { return uint32(b.mrs[i].lkey) }

// NUMANode returns the NUMA node of the buffer's first page
// (get_mempolicy(2) with MPOL_F_NODE|MPOL_F_ADDR), -1 if unknown.
func (b *Buffer) NUMANode() int {
	var node int32
	const mpolFNode, mpolFAddr = 1, 2
	_, _, e := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&node)), 0, 0,
		uintptr(unsafe.Pointer(&b.mem[0])), mpolFNode|mpolFAddr, 0)
	if e != 0 {
		return -1
	}
	return int(node)
}

// Free returns a pool buffer to the pool or deregisters a user buffer. It
// is idempotent.
func (b *Buffer) Free() error {
	if b.freed.Swap(true) {
		return nil
	}
	if b.off >= 0 {
		b.h.alloc.release(b.off)
		return nil
	}
	b.cleanup.Stop()
	var errs []error
	for _, nd := range b.mrNodes {
		errs = append(errs, nd.close())
	}
	return errors.Join(errs...)
}
