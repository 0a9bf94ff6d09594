package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/mptx-dev/mptx/qp/internal/admit"
)

// Listener defaults.
const (
	// DefaultMaxPending is the most connections a Listener holds while
	// they authenticate or wait for Accept.
	DefaultMaxPending = 64
	// DefaultMaxPendingPerSource is the most unauthenticated connections
	// a Listener holds from one IPv4 address or IPv6 /64.
	DefaultMaxPendingPerSource = 8
)

// ErrBusy is what OnReject reports for a connection the Listener closed
// without reading it: its source already holds MaxPendingPerSource
// unauthenticated connections, or the Listener is full and the source is
// among those holding the most.
var ErrBusy = errors.New("bootstrap: listener busy")

// ListenConfig configures Listen.
type ListenConfig struct {
	// Secret is the shared secret, at least MinSecret random bytes (see
	// Secrets in the package doc).
	Secret []byte
	// HandshakeTimeout bounds, for each connection, the authentication
	// (steps 1–4) and then the wait for the client's Offer, each
	// separately, and how long an authenticated client's Offer waits for
	// Accept; 0 means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// MaxPending bounds the connections that are authenticating, waiting
	// for their Offer or waiting for Accept (1..65536); 0 means
	// DefaultMaxPending. See Listener for what happens when it is reached.
	MaxPending int
	// MaxPendingPerSource bounds the unauthenticated connections from one
	// IPv4 address or IPv6 /64 (1..MaxPending); 0 means
	// DefaultMaxPendingPerSource, or MaxPending if that is smaller.
	MaxPendingPerSource int
	// OnReject, if set, is called for every connection the Listener drops
	// before Accept returns it: it failed authentication (ErrAuth), was
	// not this protocol (ErrProtocol), went silent (a deadline error), or
	// was refused for room (ErrBusy). It is called from the Listener's
	// goroutines, possibly concurrently, and must not block.
	OnReject func(remote net.Addr, err error)
	// AppHello makes the Listener serve a layer above the bootstrap
	// (mptx sessions): the client's first frame after authentication must
	// be an application frame (TypeApp and up), read under
	// HandshakeTimeout like an Offer, and AcceptApp (not Accept) returns
	// it uninterpreted.
	AppHello bool
}

// Listener accepts authenticated control connections. Unlike a loop of
// net.Listener.Accept and Server, it authenticates many clients at once,
// each on its own goroutine with its own deadline, so that a client that
// connects and then stays silent (slowloris) delays nobody else: a
// listener that authenticated one client at a time would let one idle
// connection every HandshakeTimeout keep every real client out.
//
// Admission (qp/internal/admit): the Listener holds at most MaxPending
// connections, of which at most MaxPendingPerSource unauthenticated ones
// from one source. When it is full, a new connection evicts the oldest
// unauthenticated connection among the sources holding the most, if they
// hold more than the new connection's source; otherwise it is closed.
// Nothing is read from a connection, and nothing is allocated for it
// beyond its goroutine and socket, before its proof verifies.
//
// Its methods are safe for concurrent use. The zero value is not usable;
// get one from Listen.
type Listener struct {
	ln    net.Listener
	cfg   ListenConfig
	ready chan offered // authenticated connections with their Offer; cap MaxPending, never blocks
	done  chan struct{}
	wg    sync.WaitGroup

	mu       sync.Mutex
	closed   bool                   // guarded by mu
	adm      *admit.Table[net.Conn] // connections held; guarded by mu
	sessions map[*Session]struct{}  // authenticated, not yet accepted; guarded by mu
	conns    map[net.Conn]struct{}  // every connection held; guarded by mu
	rejected int                    // guarded by mu
}

// offered is an authenticated connection whose client sent its Offer.
type offered struct {
	s     *Session
	offer *Offer
	t     Type      // AppHello: the first frame's type
	hello []byte    // AppHello: its payload
	at    time.Time // when it was ready
}

// Listen listens on the TCP address addr (host:port; port 0 picks one).
func Listen(addr string, cfg ListenConfig) (*Listener, error) {
	if err := checkSecret(cfg.Secret); err != nil {
		return nil, err
	}
	if cfg.HandshakeTimeout < 0 {
		return nil, fmt.Errorf("bootstrap: ListenConfig.HandshakeTimeout = %v (valid: 0 for %v, or > 0)", cfg.HandshakeTimeout, DefaultHandshakeTimeout)
	}
	if cfg.MaxPending < 0 || cfg.MaxPending > 1<<16 {
		return nil, fmt.Errorf("bootstrap: ListenConfig.MaxPending = %d (valid: 0 for %d, or 1..65536)", cfg.MaxPending, DefaultMaxPending)
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.MaxPendingPerSource < 0 || cfg.MaxPendingPerSource > cfg.MaxPending {
		return nil, fmt.Errorf("bootstrap: ListenConfig.MaxPendingPerSource = %d (valid: 0 for %d, or 1..MaxPending = %d)", cfg.MaxPendingPerSource, DefaultMaxPendingPerSource, cfg.MaxPending)
	}
	if cfg.MaxPendingPerSource == 0 {
		cfg.MaxPendingPerSource = min(DefaultMaxPendingPerSource, cfg.MaxPending)
	}
	cfg.Secret = append([]byte(nil), cfg.Secret...)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: listen %s: %w", addr, err)
	}
	l := &Listener{
		ln: ln, cfg: cfg,
		ready:    make(chan offered, cfg.MaxPending),
		done:     make(chan struct{}),
		adm:      admit.New[net.Conn](admit.Config{Max: cfg.MaxPending, PerSource: cfg.MaxPendingPerSource}),
		sessions: map[*Session]struct{}{},
		conns:    map[net.Conn]struct{}{},
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

// Addr returns the listening address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Rejected returns how many connections were dropped before Accept
// returned them (see ListenConfig.OnReject).
func (l *Listener) Rejected() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rejected
}

// Accept returns the next authenticated connection and the Offer its
// client sent, oldest first. Connections whose Offer waited longer than
// HandshakeTimeout (their client has likely given up) are closed and
// skipped. Accept returns ctx's error when ctx ends, and an error wrapping
// net.ErrClosed once the Listener is closed. The Session is the caller's
// to close.
func (l *Listener) Accept(ctx context.Context) (*Session, *Offer, error) {
	if l.cfg.AppHello {
		return nil, nil, fmt.Errorf("bootstrap: Accept on an AppHello listener (use AcceptApp)")
	}
	o, err := l.next(ctx)
	if err != nil {
		return nil, nil, err
	}
	return o.s, o.offer, nil
}

// AcceptApp waits for the next authenticated client of an AppHello
// listener and returns its session with the type and payload of its first
// frame.
func (l *Listener) AcceptApp(ctx context.Context) (*Session, Type, []byte, error) {
	if !l.cfg.AppHello {
		return nil, 0, nil, fmt.Errorf("bootstrap: AcceptApp on a listener without ListenConfig.AppHello")
	}
	o, err := l.next(ctx)
	if err != nil {
		return nil, 0, nil, err
	}
	return o.s, o.t, o.hello, nil
}

func (l *Listener) next(ctx context.Context) (offered, error) {
	for {
		var o offered
		select {
		case o = <-l.ready:
		case <-ctx.Done():
			return offered{}, ctx.Err()
		case <-l.done:
			return offered{}, fmt.Errorf("bootstrap: Accept: %w", net.ErrClosed)
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return offered{}, fmt.Errorf("bootstrap: Accept: %w", net.ErrClosed)
		}
		l.release(o.s.conn)
		delete(l.sessions, o.s)
		l.mu.Unlock()
		if time.Since(o.at) > l.cfg.HandshakeTimeout {
			o.s.Close()
			l.reject(o.s.RemoteAddr(), fmt.Errorf("bootstrap: the first message waited %v for Accept (HandshakeTimeout %v)", time.Since(o.at).Round(time.Millisecond), l.cfg.HandshakeTimeout))
			continue
		}
		return o, nil
	}
}

// Close stops listening, closes every connection Accept has not returned
// and waits for the Listener's goroutines. Sessions Accept returned stay
// open. It is idempotent.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	for c := range l.conns {
		c.Close()
	}
	clear(l.conns)
	clear(l.sessions)
	l.mu.Unlock()
	err := l.ln.Close()
	l.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (l *Listener) reject(remote net.Addr, err error) {
	l.mu.Lock()
	l.rejected++
	l.mu.Unlock()
	if l.cfg.OnReject != nil {
		l.cfg.OnReject(remote, err)
	}
}

// release stops counting c as held. Called with l.mu held.
func (l *Listener) release(c net.Conn) {
	delete(l.conns, c)
	l.adm.Remove(c)
}

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	for {
		c, ok := admit.Accept(l.ln.Accept, l.done)
		if !ok {
			return
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			c.Close()
			return
		}
		victim, evicted, ok := l.adm.Admit(c, admit.SourceOf(c.RemoteAddr()))
		if !ok {
			l.mu.Unlock()
			c.Close()
			l.reject(c.RemoteAddr(), fmt.Errorf("%w: its source holds too many unauthenticated connections", ErrBusy))
			continue
		}
		if evicted {
			// Its goroutine fails on the closed connection and
			// reports it.
			delete(l.conns, victim)
			victim.Close()
		}
		l.conns[c] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.handshake(c)
	}
}

// handshake authenticates c (Server), marks it authenticated, reads its
// Offer, each under its own HandshakeTimeout, and queues it for Accept. A
// client that goes silent at any step is dropped when that step's deadline
// passes.
func (l *Listener) handshake(c net.Conn) {
	defer l.wg.Done()
	// Close unblocks every step: it closes c.
	ctx := context.Background()
	fail := func(err error) {
		l.mu.Lock()
		closed := l.closed
		l.release(c)
		l.mu.Unlock()
		c.Close()
		if !closed {
			l.reject(c.RemoteAddr(), err)
		}
	}
	actx, acancel := context.WithTimeout(ctx, l.cfg.HandshakeTimeout)
	s, err := Server(actx, c, l.cfg.Secret)
	acancel()
	if err != nil {
		fail(err)
		return
	}
	l.mu.Lock()
	if l.closed || !l.adm.Authenticated(c) {
		// Closed, or evicted while it authenticated.
		l.mu.Unlock()
		s.Close()
		return
	}
	l.sessions[s] = struct{}{}
	l.mu.Unlock()
	octx, ocancel := context.WithTimeout(ctx, l.cfg.HandshakeTimeout)
	var offer *Offer
	var t Type
	var hello []byte
	if l.cfg.AppHello {
		t, hello, err = s.ReadApp(octx)
		if err == nil && t < TypeApp {
			err = fmt.Errorf("%w: got %s, want an application frame", ErrProtocol, t)
		}
	} else {
		offer, err = s.RecvOffer(octx)
	}
	ocancel()
	if err != nil {
		l.mu.Lock()
		delete(l.sessions, s)
		l.mu.Unlock()
		fail(fmt.Errorf("bootstrap: authenticated client sent no Offer: %w", err))
		return
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		s.Close()
		return
	}
	l.ready <- offered{s: s, offer: offer, t: t, hello: hello, at: time.Now()}
	l.mu.Unlock()
}
