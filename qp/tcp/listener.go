package tcp

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/internal/admit"
	"github.com/mptx-dev/mptx/units"
)

// Listener defaults.
const (
	// DefaultRecvQueue is a Receiver's completion queue depth.
	DefaultRecvQueue = 4096
	// DefaultMaxPending is the most path connections a Listener holds
	// before Accept takes them.
	DefaultMaxPending = 256
	// DefaultMaxPendingPerSource is the most unauthenticated path
	// connections a Listener holds from one source address. A sender
	// authenticates its paths one after another, each within one round
	// trip, so it rarely has more than one or two unauthenticated.
	DefaultMaxPendingPerSource = 16
)

// ListenConfig configures Listen.
type ListenConfig struct {
	// Secret is the shared secret, at least MinSecret random bytes (see
	// Secrets in the package doc).
	Secret []byte
	// HandshakeTimeout bounds steps 1–3 of the handshake on each accepted
	// connection, how long the paths of one connection may take to
	// arrive, and how long a complete connection waits for Accept; 0
	// means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// RetryTimeout is the TCP_USER_TIMEOUT of accepted path connections
	// (their ACKs); 0 means DefaultRetryTimeout, negative the kernel's.
	RetryTimeout time.Duration
	// RecvQueue is each Receiver's completion queue depth (1..1<<20); 0
	// means DefaultRecvQueue. While it is full the Receiver withholds the
	// ACKs of further WRITE WITH IMMs, which stalls the sender as RNR
	// would, without stalling TCP (see Receiver, Back-pressure).
	RecvQueue int
	// MaxPending bounds the path connections that are authenticating or
	// waiting for Accept (1..65536); 0 means DefaultMaxPending. When it is
	// reached, a new connection evicts the oldest unauthenticated one of
	// the source holding the most, if that source would still hold more
	// than the newcomer's, and is closed at once otherwise (see Admission
	// in the package doc).
	MaxPending int
	// MaxPendingPerSource bounds the unauthenticated path connections
	// from one IPv4 address or IPv6 /64 (1..MaxPending); 0 means
	// DefaultMaxPendingPerSource, or MaxPending if that is smaller.
	// Further connections from that source are closed at once.
	MaxPendingPerSource int
	// Checksum makes each Receiver compute the CRC32C of every WRITE WITH
	// IMM's payload as it reads it, a piece (sumPiece) at a time right
	// after the piece landed in the region, while it is in the CPU's
	// cache, and report it in the frame's receive completion
	// (qp.Completion.Sum, HasSum). A consumer that checksums what it
	// receives then needs no second pass over the region.
	Checksum bool
}

// Listener accepts mptx TCP connections. Its methods are safe for
// concurrent use. The zero value is not usable; get one from Listen.
type Listener struct {
	ln    *net.TCPListener
	cfg   ListenConfig
	key   []byte      // the handshake key (deriveKey)
	ready chan *group // complete groups, cap MaxPending (never blocks)
	done  chan struct{}
	wg    sync.WaitGroup

	mu      sync.Mutex
	closed  bool                       // guarded by mu
	pending map[ConnID]*group          // incomplete groups; guarded by mu
	conns   map[*net.TCPConn]struct{}  // connections not yet accepted; guarded by mu
	adm     *admit.Table[*net.TCPConn] // the same, by source and authentication; guarded by mu
	recvs   map[ConnID]*Receiver       // accepted and not closed: rejoins go to them; guarded by mu
}

// group is the set of path connections of one ConnID.
type group struct {
	id       ConnID
	paths    []pendingPath
	have     int
	complete chan struct{}
	readyAt  time.Time
}

type pendingPath struct {
	conn *net.TCPConn
	b    binding
}

// Listen listens on the TCP address addr ("host:port"; port 0 chooses one,
// see Addr).
func Listen(addr string, cfg ListenConfig) (*Listener, error) {
	if err := checkSecret(cfg.Secret); err != nil {
		return nil, err
	}
	key, err := deriveKey(cfg.Secret)
	if err != nil {
		return nil, err
	}
	if cfg.HandshakeTimeout < 0 {
		return nil, fmt.Errorf("tcp: ListenConfig.HandshakeTimeout = %v (valid: 0 for %v, or > 0)", cfg.HandshakeTimeout, DefaultHandshakeTimeout)
	}
	if cfg.RecvQueue < 0 || cfg.RecvQueue > 1<<20 {
		return nil, fmt.Errorf("tcp: ListenConfig.RecvQueue = %d (valid: 0 for %d, or 1..%d)", cfg.RecvQueue, DefaultRecvQueue, 1<<20)
	}
	if cfg.MaxPending < 0 || cfg.MaxPending > 1<<16 {
		return nil, fmt.Errorf("tcp: ListenConfig.MaxPending = %d (valid: 0 for %d, or 1..65536)", cfg.MaxPending, DefaultMaxPending)
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.RetryTimeout == 0 {
		cfg.RetryTimeout = DefaultRetryTimeout
	}
	if cfg.RecvQueue == 0 {
		cfg.RecvQueue = DefaultRecvQueue
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.MaxPendingPerSource < 0 || cfg.MaxPendingPerSource > cfg.MaxPending {
		return nil, fmt.Errorf("tcp: ListenConfig.MaxPendingPerSource = %d (valid: 0 for %d, or 1..MaxPending = %d)", cfg.MaxPendingPerSource, DefaultMaxPendingPerSource, cfg.MaxPending)
	}
	if cfg.MaxPendingPerSource == 0 {
		cfg.MaxPendingPerSource = min(DefaultMaxPendingPerSource, cfg.MaxPending)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcp: %w", err)
	}
	l := &Listener{
		ln: ln.(*net.TCPListener), cfg: cfg, key: key,
		ready: make(chan *group, cfg.MaxPending), done: make(chan struct{}),
		pending: map[ConnID]*group{}, conns: map[*net.TCPConn]struct{}{},
		recvs: map[ConnID]*Receiver{},
		adm:   admit.New[*net.TCPConn](admit.Config{Max: cfg.MaxPending, PerSource: cfg.MaxPendingPerSource}),
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

// Addr returns the listener's address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Close stops listening, closes every connection not yet accepted (rejoins
// in progress included) and waits for the listener's goroutines. Receivers
// already accepted keep their healthy paths, but a path that breaks can no
// longer rejoin (Conn.Reset fails). Close is idempotent.
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
	l.adm = admit.New[*net.TCPConn](admit.Config{Max: l.cfg.MaxPending, PerSource: l.cfg.MaxPendingPerSource})
	clear(l.pending)
	clear(l.recvs)
	l.mu.Unlock()
	err := l.ln.Close()
	l.wg.Wait()
	return err
}

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	for {
		nc, ok := admit.Accept(l.ln.AcceptTCP, l.done)
		if !ok {
			return
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			nc.Close()
			continue
		}
		victim, evicted, ok := l.adm.Admit(nc, admit.SourceOf(nc.RemoteAddr()))
		if !ok {
			l.mu.Unlock()
			nc.Close()
			continue
		}
		if evicted {
			// Its handshake goroutine fails on the closed connection.
			delete(l.conns, victim)
			victim.Close()
		}
		l.conns[nc] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.handshake(nc)
	}
}

// drop closes a connection that is not part of a complete group.
func (l *Listener) drop(nc *net.TCPConn) {
	l.mu.Lock()
	l.release(nc)
	l.mu.Unlock()
	nc.Close()
}

// release stops counting nc as held by the listener. Called with l.mu
// held.
func (l *Listener) release(nc *net.TCPConn) {
	delete(l.conns, nc)
	l.adm.Remove(nc)
}

// handshake authenticates one path connection (steps 1–3) and parks it in
// its group, or hands a rejoin to its Receiver. The goroutine that creates a
// group waits for the group to complete and expires it if it does not in
// time.
func (l *Listener) handshake(nc *net.TCPConn) {
	defer l.wg.Done()
	deadline := time.Now().Add(l.cfg.HandshakeTimeout)
	_ = nc.SetDeadline(deadline)
	var b binding
	if err := serverHello(nc, l.key, &b); err != nil {
		l.drop(nc)
		return
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	if !l.adm.Authenticated(nc) {
		// Evicted while it authenticated (it was closed).
		l.mu.Unlock()
		nc.Close()
		return
	}
	if b.rejoin {
		l.mu.Unlock()
		l.rejoin(nc, &b)
		return
	}
	if l.recvs[b.id] != nil {
		// A first join with the id of a live connection: only a peer
		// that knows the secret can send it, but it is no rejoin.
		l.mu.Unlock()
		l.drop(nc)
		return
	}
	g := l.pending[b.id]
	created := false
	if g == nil {
		g = &group{id: b.id, paths: make([]pendingPath, b.count), complete: make(chan struct{})}
		l.pending[b.id] = g
		created = true
	}
	if len(g.paths) != int(b.count) || g.paths[b.index].conn != nil {
		// The same id with another path count, or a path twice.
		l.mu.Unlock()
		l.drop(nc)
		return
	}
	g.paths[b.index] = pendingPath{conn: nc, b: b}
	g.have++
	if g.have == len(g.paths) {
		delete(l.pending, g.id)
		g.readyAt = time.Now()
		close(g.complete)
		l.ready <- g
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	if !created {
		return
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-g.complete:
	case <-l.done:
	case <-t.C:
		l.mu.Lock()
		if l.pending[g.id] == g {
			delete(l.pending, g.id)
			for _, pp := range g.paths {
				if pp.conn != nil {
					l.release(pp.conn)
					pp.conn.Close()
				}
			}
		}
		l.mu.Unlock()
	}
}

// Accept waits for a connection whose paths have all authenticated, gives
// it region as its receive region and completes the handshake. The returned
// Receiver owns region until it is closed. Connections that waited longer
// than HandshakeTimeout for Accept, or whose sender has gone, are closed and
// skipped. Accept returns ctx's error when ctx ends and an error wrapping
// qp.ErrClosed when the listener is closed.
func (l *Listener) Accept(ctx context.Context, region []byte) (*Receiver, error) {
	for {
		var g *group
		select {
		case g = <-l.ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("tcp: Accept: %w", ctx.Err())
		case <-l.done:
			return nil, fmt.Errorf("tcp: Accept: listener closed: %w", qp.ErrClosed)
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return nil, fmt.Errorf("tcp: Accept: listener closed: %w", qp.ErrClosed)
		}
		for _, pp := range g.paths {
			l.release(pp.conn)
		}
		l.mu.Unlock()
		if time.Since(g.readyAt) > l.cfg.HandshakeTimeout {
			closeGroup(g)
			continue
		}
		r, err := l.accept(ctx, g, region)
		if err != nil {
			closeGroup(g)
			if ctx.Err() != nil {
				return nil, fmt.Errorf("tcp: Accept: %w", ctx.Err())
			}
			continue
		}
		return r, nil
	}
}

// rejoin hands an authenticated rejoin (Conn.Reset) to the Receiver of its
// connection id, or refuses it with the refuse byte.
func (l *Listener) rejoin(nc *net.TCPConn, b *binding) {
	l.mu.Lock()
	r := l.recvs[b.id]
	l.mu.Unlock()
	if r == nil || int(b.count) != len(r.paths) {
		serverRefuse(nc)
		l.drop(nc)
		return
	}
	if !r.rejoin(l, nc, b) {
		l.drop(nc)
		return
	}
	l.mu.Lock()
	l.release(nc) // the Receiver owns it now
	l.mu.Unlock()
}

// forget unregisters a closed Receiver: its paths can no longer rejoin.
func (l *Listener) forget(r *Receiver) {
	l.mu.Lock()
	if l.recvs[r.id] == r {
		delete(l.recvs, r.id)
	}
	l.mu.Unlock()
}

func closeGroup(g *group) {
	for _, pp := range g.paths {
		pp.conn.Close()
	}
}

func (l *Listener) accept(ctx context.Context, g *group, region []byte) (*Receiver, error) {
	n := len(g.paths)
	r := &Receiver{
		id: g.id, region: region, infos: make([]qp.PathInfo, n), paths: make([]*recvPath, n),
		notify: make(chan struct{}, 1), done: make(chan struct{}), ln: l,
		sum: l.cfg.Checksum,
	}
	r.space.L = &r.mu
	r.cq.Init(l.cfg.RecvQueue)
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(l.cfg.HandshakeTimeout)
	}
	for i, pp := range g.paths {
		qpn := nextQPN()
		_ = pp.conn.SetDeadline(deadline)
		stop := context.AfterFunc(ctx, func() { _ = pp.conn.SetDeadline(time.Unix(1, 0)) })
		err := serverAccept(pp.conn, l.key, &pp.b, uint64(len(region)), qpn)
		if !stop() && err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return nil, err
		}
		_ = pp.conn.SetDeadline(time.Time{})
		_ = pp.conn.SetNoDelay(true)
		if err := setUserTimeout(pp.conn, l.cfg.RetryTimeout); err != nil {
			return nil, err
		}
		rtt, mss, _, _ := tcpInfo(pp.conn)
		info := qp.PathInfo{QPN: qpn, Device: "tcp", Port: 1, LineRate: DefaultLineRate, BaseRTT: rtt}
		if mss > 0 && mss <= 1<<16 {
			info.MTU = units.Bytes(mss)
		}
		if ra, ok := pp.conn.RemoteAddr().(*net.TCPAddr); ok {
			info.SrcPort = uint16(ra.Port) // the sender's source port: the flow's ECMP entropy
		}
		r.infos[i] = info
		r.paths[i] = newRecvPath(r, i, pp.conn, qpn)
	}
	for _, p := range r.paths {
		r.wg.Add(1)
		go p.readLoop(p.conn, p.exited)
	}
	l.mu.Lock()
	if !l.closed {
		l.recvs[r.id] = r
	}
	l.mu.Unlock()
	return r, nil
}
