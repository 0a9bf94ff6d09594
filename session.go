package mptx

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp/verbs"
	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
	"github.com/mptx-dev/mptx/units"
)

// Transport selects how a session's data moves.
type Transport string

// Transports.
const (
	// TransportAuto uses verbs when both ends have a usable RDMA device,
	// else TCP.
	TransportAuto Transport = "auto"
	// TransportTCP uses qp/tcp: RDMA WRITE semantics over one TCP
	// connection per path.
	TransportTCP Transport = "tcp"
	// TransportVerbs uses qp/verbs: RC queue pairs through libibverbs.
	TransportVerbs Transport = "verbs"
)

// ParseTransport parses "auto", "tcp" or "verbs" ("" is auto).
func ParseTransport(s string) (Transport, error) {
	switch Transport(s) {
	case "", TransportAuto:
		return TransportAuto, nil
	case TransportTCP, TransportVerbs:
		return Transport(s), nil
	}
	return "", fmt.Errorf("mptx: transport %q (valid: auto, tcp, verbs)", s)
}

// Defaults for Config.
const (
	DefaultPaths      = 4
	DefaultRegionSize = 1 * units.GiB
	DefaultSendBuffer = 256 * units.MiB
	DefaultTimeout    = 10 * time.Second
	// DefaultTCPMinTimeout is the engine's stall floor on TCP. A TCP
	// path that dies is reported by the kernel (TCP_USER_TIMEOUT, a reset)
	// as an error completion; the stall timer is only the backstop for a
	// path that hangs. Its work requests queue in qp/tcp behind the socket
	// buffer, so their completion time includes that queue (tens to
	// hundreds of milliseconds on a loaded host, before the smoothed RTT
	// has learned it), and a retransmission waits at least 200 ms (Linux
	// TCP_RTO_MIN): a floor below that declares working paths stalled.
	DefaultTCPMinTimeout = 2 * time.Second
)

// Config configures a session, for Dial (the sending end) and Listen (the
// receiving end). Zero fields take the documented defaults.
type Config struct {
	// Secret is the shared secret authenticating both the control channel
	// and the data paths: at least 16 random bytes (see qp/tcp, Secrets).
	Secret []byte
	// Transport is auto (the default), tcp or verbs.
	Transport Transport
	// Paths is the number of paths (queue pairs or TCP connections); 0
	// means DefaultPaths. A sender's TCP.Paths, when set, decides instead.
	Paths int
	// TCP configures the TCP transport.
	TCP TCPConfig
	// Verbs configures the verbs transport.
	Verbs VerbsConfig
	// Engine configures the sender's multipath engine (congestion
	// control, path policy, chunk size...). Engine.Paths is filled from
	// the connection. On TCP, Engine.MinTimeout defaults to
	// DefaultTCPMinTimeout.
	Engine multipath.Config
	// SendBuffer is the sender's registered staging buffer, for
	// transports that cannot send from the caller's memory (verbs, for
	// now; TCP sends from it directly, see SendAsync): tensors are copied
	// into it before they are posted, and a tensor larger than it cannot
	// be sent. 0 means DefaultSendBuffer.
	SendBuffer units.Bytes
	// Pool is the sender's allocatable pool (Session.Alloc): registered
	// with the transport together with the send buffer, once, so that a
	// tensor in a Buffer is sent without a copy or a registration
	// (session_alloc.go). 0 means none.
	Pool units.Bytes
	// RegionSize is the receiver's region (the memory peers write into):
	// tensors in flight at once must fit in it together, and one tensor
	// larger than it is refused. 0 means DefaultRegionSize, or len(Region).
	RegionSize units.Bytes
	// Region, if set, is the receiver's region: the caller's memory,
	// registered once when the session is accepted, into which received
	// tensors land (Tensor.Data slices it). It must not be touched while
	// the session lives except through received Tensors. Over verbs the
	// NIC writes it directly (zero-copy), so it must not be Go heap
	// memory (cgo pointer rules): map it with mmap(2) (unix.Mmap) and
	// unmap it only after the session has ended and its tensors are
	// released.
	Region []byte
	// NoChecksum turns the per-tensor CRC32C off (it costs one pass over
	// the tensor on each end).
	NoChecksum bool
	// Timeout bounds each control step (handshake, a reply); 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// Accept, for Listen only, bounds how many authenticated sessions
	// wait for Accept; 0 means 64.
	Accept int
	// Telemetry, if set, records the session's transfers and chunks at
	// its end (telemetry.Sessions for OpenTelemetry; see docs/telemetry.md).
	Telemetry Telemetry
}

// TCPConfig configures the TCP transport.
type TCPConfig struct {
	// Paths has one entry per path; empty means Config.Paths paths from
	// kernel-chosen sources. A path's Remote, when set, is the receiver's
	// IP address for that path (its port is the receiver's data port).
	Paths []TCPPath
	// RetryTimeout is each path's TCP_USER_TIMEOUT; 0 means qp/tcp's
	// default.
	RetryTimeout time.Duration
}

// TCPPath is one TCP path.
type TCPPath struct {
	Remote    string        // receiver IP for this path; "" means the address dialed
	Local     string        // source IP; "" means kernel-chosen
	Interface string        // SO_BINDTODEVICE interface; "" for none
	LineRate  units.BitRate // 0 means qp/tcp's default (10 Gb/s)
	NIC       int           // paths with the same NIC share a port pacer
}

func (c *Config) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

func (c *Config) validate() error {
	if len(c.Secret) < 16 {
		return fmt.Errorf("mptx: Config.Secret is %d bytes (valid: at least 16 random bytes)", len(c.Secret))
	}
	if _, err := ParseTransport(string(c.Transport)); err != nil {
		return err
	}
	if c.Paths < 0 || c.Paths > multipath.MaxPaths {
		return fmt.Errorf("mptx: Config.Paths = %d (valid: 0 for %d, or 1..%d)", c.Paths, DefaultPaths, multipath.MaxPaths)
	}
	if len(c.TCP.Paths) > multipath.MaxPaths {
		return fmt.Errorf("mptx: Config.TCP.Paths has %d paths (valid: up to %d)", len(c.TCP.Paths), multipath.MaxPaths)
	}
	if c.SendBuffer < 0 || c.RegionSize < 0 || c.Timeout < 0 || c.Accept < 0 {
		return fmt.Errorf("mptx: Config.SendBuffer %v, RegionSize %v, Timeout %v, Accept %d (valid: >= 0)", c.SendBuffer, c.RegionSize, c.Timeout, c.Accept)
	}
	if err := c.validatePool(); err != nil {
		return err
	}
	if c.Verbs.QPsPerNIC < 0 || c.Verbs.QPsPerNIC > verbs.MaxQPsPerNIC {
		return fmt.Errorf("mptx: Config.Verbs.QPsPerNIC = %d (valid: 0 to spread Paths over the NICs, or 1..%d)", c.Verbs.QPsPerNIC, verbs.MaxQPsPerNIC)
	}
	if c.Region != nil && c.RegionSize != 0 && c.RegionSize != units.Bytes(len(c.Region)) {
		return fmt.Errorf("mptx: Config.RegionSize = %v but len(Config.Region) = %d (set one)", c.RegionSize, len(c.Region))
	}
	return nil
}

func (c *Config) paths() int {
	switch {
	case len(c.TCP.Paths) > 0:
		return len(c.TCP.Paths)
	case c.Paths > 0:
		return c.Paths
	}
	return DefaultPaths
}

// Errors.
var (
	// ErrSessionClosed is returned by the methods of a closed session.
	ErrSessionClosed = errors.New("mptx: session closed")
	// ErrRefused wraps a receiver's refusal of a tensor (too large for its
	// region, say).
	ErrRefused = errors.New("mptx: refused by the receiver")
)

// TransferError is a tensor that failed while its session lives on: a
// receiver's Recv returns it for a tensor it could not deliver (a checksum
// mismatch, the sender's failure or cancellation), and the session goes on.
type TransferError struct {
	ID   multipath.TransferID
	Name string
	Err  error
}

func (e *TransferError) Error() string {
	return fmt.Sprintf("mptx: tensor %d (%q): %v", e.ID, e.Name, e.Err)
}

func (e *TransferError) Unwrap() error { return e.Err }

// ctrlConn is the control channel of one session, shared by its
// goroutines: sends from any of them, receives from the reader only. Over
// verbs the transport shares it too: the session reads its frames from in
// (a bootstrap.Mux routes the verbs connection's elsewhere).
type ctrlConn struct {
	s       *bootstrap.Session
	in      *bootstrap.Inbox // nil: the reader reads s itself
	timeout time.Duration
}

func (c *ctrlConn) send(t bootstrap.Type, payload []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	return c.s.WriteApp(ctx, t, payload)
}

// read blocks until the next frame (no deadline: a session idles between
// tensors); closing the session unblocks it.
func (c *ctrlConn) read() (bootstrap.Type, []byte, error) {
	if c.in != nil {
		return c.in.Recv(context.Background())
	}
	return c.s.ReadApp(context.Background())
}

// Listener accepts sessions. Its methods are safe for concurrent use.
type Listener struct {
	cfg   Config
	bl    *bootstrap.Listener
	ready chan *Session
	done  chan struct{}
	wg    sync.WaitGroup
}

// Listen listens for sessions on the TCP address addr (host:port; port 0
// picks one). Every accepted session is a receiving end: tensors sent by
// its dialer arrive through Session.Recv. Peers are authenticated
// concurrently, each step under its own deadline (Config.Timeout), with
// source-fair admission (package bootstrap's Listener: a peer that
// connects and stays silent, or many such peers from one source, cannot
// keep a real sender out).
func Listen(addr string, cfg Config) (*Listener, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Accept == 0 {
		cfg.Accept = 64
	}
	bl, err := bootstrap.Listen(addr, bootstrap.ListenConfig{Secret: cfg.Secret, HandshakeTimeout: cfg.timeout(), AppHello: true})
	if err != nil {
		return nil, fmt.Errorf("mptx: %w", err)
	}
	l := &Listener{cfg: cfg, bl: bl, ready: make(chan *Session, cfg.Accept), done: make(chan struct{})}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

// Addr returns the listener's address.
func (l *Listener) Addr() net.Addr { return l.bl.Addr() }

// Rejected returns how many peers were refused before a session started
// (authentication, protocol, silence, or room; see bootstrap.Listener).
func (l *Listener) Rejected() int { return l.bl.Rejected() }

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	for {
		bs, t, hello, err := l.bl.AcceptApp(context.Background())
		if err != nil {
			return
		}
		l.wg.Add(1)
		go l.serve(bs, t, hello)
	}
}

// serve sets the session up; failures close it.
func (l *Listener) serve(bs *bootstrap.Session, t bootstrap.Type, hello []byte) {
	defer l.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.timeout())
	defer cancel()
	stop := context.AfterFunc(ctx, func() { bs.Close() })
	host, _, _ := net.SplitHostPort(l.bl.Addr().String())
	s, err := acceptSession(ctx, bs, t, hello, host, l.cfg)
	if !stop() {
		err = fmt.Errorf("mptx: session set-up took longer than Config.Timeout %v", l.cfg.timeout())
		if s != nil {
			s.end(err)
		}
	}
	if err != nil {
		bs.SendAbort(context.Background(), err.Error())
		bs.Close()
		return
	}
	select {
	case l.ready <- s:
	case <-l.done:
		s.Close()
	}
}

// Accept waits for the next session.
func (l *Listener) Accept(ctx context.Context) (*Session, error) {
	select {
	case s := <-l.ready:
		return s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.done:
		return nil, ErrSessionClosed
	}
}

// Close stops listening and closes the sessions not yet accepted.
func (l *Listener) Close() error {
	select {
	case <-l.done:
		return nil
	default:
	}
	close(l.done)
	err := l.bl.Close()
	l.wg.Wait()
	for {
		select {
		case s := <-l.ready:
			s.Close()
		default:
			return err
		}
	}
}

// Session is one end of an authenticated multipath connection: the
// dialer's end sends tensors (Send, SendAsync), the acceptor's end
// receives them (Recv). All its methods are safe for concurrent use from
// any number of goroutines; one internal goroutine drives the engine.
type Session struct {
	cfg   Config
	ctrl  *ctrlConn
	tr    Transport
	snd   *sendSide // the dialer's end
	rcv   *recvSide // the acceptor's end
	once  sync.Once
	done  chan struct{}
	mu    sync.Mutex
	err   error // why the session ended
	peers string
	// closing is set by Close before it says Bye, so that the peer's
	// answer cannot be taken for the peer closing first.
	closing atomic.Bool
	loop    sync.WaitGroup // the side's loop goroutine, until it closed the paths
	os      osSession      // one-sided access: descriptors received, revocations (region.go)
}

// Transport returns the transport in use (tcp or verbs).
func (s *Session) Transport() Transport { return s.tr }

// RemoteAddr returns the peer's control address.
func (s *Session) RemoteAddr() string { return s.peers }

// Done is closed when the session has ended (Close, or a failure).
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns why the session ended: nil while it lives, ErrSessionClosed
// after Close, or the failure.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// end records why the session ended (the first reason wins) and tears it
// down; it is idempotent.
func (s *Session) end(err error) {
	s.once.Do(func() {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(s.done)
		if s.snd != nil {
			s.snd.shutdown(err)
		}
		if s.rcv != nil {
			s.rcv.shutdown(err)
		}
		s.ctrl.s.Close()
	})
}

// Close ends the session: transfers in progress fail with
// ErrSessionClosed, the peer is told (Bye), the paths are closed. It
// returns once they are (their queue pairs destroyed; over verbs, the
// registered memory is freed then unless received tensors still hold it:
// see Tensor.Release).
func (s *Session) Close() error {
	select {
	case <-s.done:
		s.loop.Wait()
		return nil
	default:
	}
	if s.rcv != nil {
		s.rcv.waitReceipts(s.cfg.timeout())
	}
	s.closing.Store(true)
	_ = s.ctrl.send(msgBye, nil)
	s.end(ErrSessionClosed)
	s.loop.Wait()
	return nil
}

// closedCause words a transfer's failure once Close has begun: the
// session's end is the cause (the peer, told Bye, may revoke its keys or
// drop the paths before our own end cancels what is in flight, so the
// failure the engine sees first is often a remote access error or a lost
// path). The original error stays wrapped.
func (s *Session) closedCause(err error) error {
	if err == nil || !s.closing.Load() || errors.Is(err, ErrSessionClosed) {
		return err
	}
	return fmt.Errorf("%w (in flight: %w)", ErrSessionClosed, err)
}

// readLoop hands every control frame to the side's handler until the
// channel fails or a Bye arrives.
func (s *Session) readLoop(handle func(t bootstrap.Type, payload []byte) error) {
	for {
		t, payload, err := s.ctrl.read()
		if err != nil {
			switch {
			case s.closing.Load():
				s.end(ErrSessionClosed) // our own Close raced the peer's answer
			default:
				s.end(fmt.Errorf("mptx: control channel to %s: %w", s.peers, err))
			}
			return
		}
		if t == msgBye && s.closing.Load() {
			s.end(ErrSessionClosed)
			return
		}
		if t == msgBye {
			s.end(fmt.Errorf("mptx: %s closed the session: %w", s.peers, ErrSessionClosed))
			return
		}
		if err := s.onCtrlOr(handle, t, payload); err != nil {
			_ = s.ctrl.send(msgBye, nil)
			s.end(err)
			return
		}
	}
}
