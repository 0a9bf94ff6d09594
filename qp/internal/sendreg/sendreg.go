// Package sendreg is the table of extra send regions a backend keeps for
// qp.SendRegions: ids for SendWR.Region, looked up without a lock on the
// post path while other goroutines register and unregister buffers.
//
// The table is copy-on-write: Add and Remove copy it under a mutex and
// publish the copy with an atomic store; Lookup loads the current copy and
// indexes it. An id is (generation << 16) | (slot + 1): slot is the entry's
// index, and its generation grows (modulo 2^16) each time the slot is
// reused, so a stale id (of a removed region) is refused rather than
// aliased to the buffer that took its slot. At most MaxRegions regions are
// registered at once.
package sendreg

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// MaxRegions is the most regions registered at once.
const MaxRegions = 1<<16 - 1

type entry struct {
	id  uint32 // 0: free
	gen uint16 // the generation of the slot's latest id
	buf []byte
}

// Table is a send-region table. The zero value is empty and ready; it
// must not be copied after first use. Its methods are safe for concurrent
// use.
type Table struct {
	mu   sync.Mutex // serialises Add and Remove
	cur  atomic.Pointer[[]entry]
	live int // guarded by mu
}

// Add registers buf and returns its id (never 0). pkg prefixes errors.
func (t *Table) Add(pkg string, buf []byte) (uint32, error) {
	if len(buf) == 0 {
		return 0, fmt.Errorf("%s: AddSendRegion: empty buffer (valid: at least 1 byte)", pkg)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live >= MaxRegions {
		return 0, fmt.Errorf("%s: AddSendRegion: %d regions registered already (valid: at most %d at once)", pkg, t.live, MaxRegions)
	}
	var old []entry
	if p := t.cur.Load(); p != nil {
		old = *p
	}
	slot := len(old)
	for i := range old {
		if old[i].id == 0 {
			slot = i
			break
		}
	}
	n := make([]entry, max(len(old), slot+1))
	copy(n, old)
	e := &n[slot]
	if slot < len(old) {
		e.gen++ // a reused slot: a new generation
	}
	e.id = uint32(e.gen)<<16 | uint32(slot+1)
	e.buf = buf
	t.cur.Store(&n)
	t.live++
	return e.id, nil
}

// Remove unregisters id. pkg prefixes errors.
func (t *Table) Remove(pkg string, id uint32) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var old []entry
	if p := t.cur.Load(); p != nil {
		old = *p
	}
	slot := int(id&0xffff) - 1
	if id == 0 || slot < 0 || slot >= len(old) || old[slot].id != id {
		return fmt.Errorf("%s: RemoveSendRegion: region %#x is not registered", pkg, id)
	}
	n := make([]entry, len(old))
	copy(n, old)
	n[slot].id, n[slot].buf = 0, nil
	t.cur.Store(&n)
	t.live--
	return nil
}

// Lookup returns the buffer of region id, or false if id is not
// registered. It takes no lock and allocates nothing.
func (t *Table) Lookup(id uint32) ([]byte, bool) {
	p := t.cur.Load()
	if p == nil {
		return nil, false
	}
	s := *p
	slot := int(id&0xffff) - 1
	if slot < 0 || slot >= len(s) || s[slot].id != id {
		return nil, false
	}
	return s[slot].buf, true
}

// Len returns how many regions are registered.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live
}
