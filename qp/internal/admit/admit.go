// Package admit is the admission control of mptx's listeners (qp/tcp's
// Listener and qp/verbs/bootstrap's): which connections a listener holds
// while they authenticate, so that peers without the shared secret cannot
// keep one that has it out.
//
// A listener holds at most Max connections that have not been handed to
// the application yet, authenticated or not. Connections that have not
// authenticated are further bounded per source: at most PerSource from
// one IPv4 address, or from one IPv6 /64 (one host usually owns a whole
// /64). When the listener is full, a newcomer evicts the oldest
// unauthenticated connection among the sources that hold the most of
// them, provided those hold more than the newcomer's source does; if not
// (the newcomer's source is among the heaviest already), the newcomer is
// refused. So peers holding idle connections, slowloris style, give up one
// of their own for every connection from a lighter source, and a
// legitimate sender, which authenticates within a round trip and so never
// holds more than one or two unauthenticated connections, gets in at
// once. To keep it out, an attacker must hold connections from more
// sources (IPv4 addresses, IPv6 /64s) than the listener has slots, or
// keep opening connections from fresh sources faster than the sender
// completes its handshake, so that the sender's own connection is the
// oldest when the next newcomer arrives.
//
// A Table is not safe for concurrent use; the listener guards it with its
// own lock.
package admit

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Config bounds a Table.
type Config struct {
	// Max is the most connections held, authenticated or not (>= 1).
	Max int
	// PerSource is the most unauthenticated connections held from one
	// source (>= 1).
	PerSource int
}

// Validate reports a field outside its range.
func (c Config) Validate() error {
	if c.Max < 1 {
		return fmt.Errorf("admit: Config.Max = %d (valid: >= 1)", c.Max)
	}
	if c.PerSource < 1 {
		return fmt.Errorf("admit: Config.PerSource = %d (valid: >= 1)", c.PerSource)
	}
	return nil
}

// Table tracks the connections a listener holds. C identifies a
// connection (a *net.TCPConn, say). The zero Table is not usable; get one
// from New.
type Table[C comparable] struct {
	cfg     Config
	seq     uint64
	entries map[C]*entry
	unauth  map[netip.Addr]int // unauthenticated connections per source key
}

type entry struct {
	src    netip.Addr // the source key
	seq    uint64     // admission order
	authed bool
}

// New returns an empty Table. It panics on an invalid cfg (validate it
// first, where the listener's own config is checked).
func New[C comparable](cfg Config) *Table[C] {
	if err := cfg.Validate(); err != nil {
		panic("admit: BUG: " + err.Error())
	}
	return &Table[C]{cfg: cfg, entries: map[C]*entry{}, unauth: map[netip.Addr]int{}}
}

// SourceKey returns the source a connection from addr counts against: the
// IPv4 address, or the IPv6 /64 prefix (as its first address).
// IPv4-mapped IPv6 addresses count as IPv4.
func SourceKey(addr netip.Addr) netip.Addr {
	addr = addr.Unmap()
	if addr.Is6() {
		p, err := addr.WithZone("").Prefix(64)
		if err == nil {
			return p.Addr()
		}
	}
	return addr
}

// SourceOf returns the source key of a connection's remote address (a
// *net.TCPAddr); other addresses share one key.
func SourceOf(remote net.Addr) netip.Addr {
	if ta, ok := remote.(*net.TCPAddr); ok {
		return SourceKey(ta.AddrPort().Addr())
	}
	return netip.Addr{}
}

// Len returns the connections held.
func (t *Table[C]) Len() int { return len(t.entries) }

// Unauthenticated returns the unauthenticated connections held from src's
// source.
func (t *Table[C]) Unauthenticated(src netip.Addr) int { return t.unauth[SourceKey(src)] }

// Admit decides on a new connection c from src. If ok, c is held as
// unauthenticated; if evicted is also true, victim was dropped from the
// table to make room and the caller must close it. If not ok, the caller
// closes c.
func (t *Table[C]) Admit(c C, src netip.Addr) (victim C, evicted, ok bool) {
	key := SourceKey(src)
	if _, dup := t.entries[c]; dup {
		panic("admit: BUG: a connection admitted twice")
	}
	mine := t.unauth[key]
	if mine >= t.cfg.PerSource {
		return victim, false, false
	}
	if len(t.entries) >= t.cfg.Max {
		// Evict the oldest unauthenticated connection of the sources
		// holding the most, if they hold more than the newcomer's.
		most := 0
		for _, n := range t.unauth {
			most = max(most, n)
		}
		if most <= mine {
			return victim, false, false
		}
		var oldest *entry
		for conn, e := range t.entries {
			if !e.authed && t.unauth[e.src] == most && (oldest == nil || e.seq < oldest.seq) {
				victim, oldest = conn, e
			}
		}
		t.Remove(victim)
		evicted = true
	}
	t.seq++
	t.entries[c] = &entry{src: key, seq: t.seq}
	t.unauth[key]++
	return victim, evicted, true
}

// Authenticated records that c proved it knows the secret: it no longer
// counts against its source's limit, nor can it be evicted; it still
// counts against Max until Remove. It reports false if c is not held (it
// was evicted, say).
func (t *Table[C]) Authenticated(c C) bool {
	e := t.entries[c]
	if e == nil {
		return false
	}
	if !e.authed {
		e.authed = true
		t.dec(e.src)
	}
	return true
}

// Remove forgets c (it was closed, or handed to the application). It
// reports whether c was held.
func (t *Table[C]) Remove(c C) bool {
	e := t.entries[c]
	if e == nil {
		return false
	}
	delete(t.entries, c)
	if !e.authed {
		t.dec(e.src)
	}
	return true
}

func (t *Table[C]) dec(key netip.Addr) {
	if t.unauth[key] <= 1 {
		delete(t.unauth, key)
		return
	}
	t.unauth[key]--
}

// Accept calls accept until it returns a connection, and reports false
// once done is closed or the listener is (net.ErrClosed). Any other error
// (out of file descriptors, say) backs off 10 ms before the next try, as
// net/http's server does, rather than spin. Both listeners' accept loops
// take their connections through it.
func Accept[C any](accept func() (C, error), done <-chan struct{}) (C, bool) {
	var backoff *time.Timer
	for {
		c, err := accept()
		if err == nil {
			if backoff != nil {
				backoff.Stop()
			}
			return c, true
		}
		var zero C
		select {
		case <-done:
			return zero, false
		default:
		}
		if errors.Is(err, net.ErrClosed) {
			return zero, false
		}
		if backoff == nil {
			backoff = time.NewTimer(10 * time.Millisecond)
		} else {
			backoff.Reset(10 * time.Millisecond)
		}
		select {
		case <-done:
			backoff.Stop()
			return zero, false
		case <-backoff.C:
		}
	}
}
