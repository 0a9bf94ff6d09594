package tcp

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/internal/cqring"
	"github.com/mptx-dev/mptx/qp/internal/sendreg"
	"github.com/mptx-dev/mptx/units"
)

// Defaults for zero Config fields.
const (
	// DefaultLineRate is PathInfo.LineRate for a path whose PathConfig
	// leaves it 0. The engine paces each path at most at its line rate, so
	// set it to the NIC's rate.
	DefaultLineRate = 10 * units.Gbps
	// DefaultMaxSendWR is the send queue depth per path.
	DefaultMaxSendWR = 256
	// DefaultRetryTimeout is the TCP_USER_TIMEOUT of every path.
	DefaultRetryTimeout = 2 * time.Second
)

// maxBatch is the most work requests one writev carries (two iovecs each;
// Linux's IOV_MAX is 1024).
const maxBatch = 256

// Notifier is qp.Notifier, implemented by Conn and Receiver. Notify
// returns a channel that receives a value (it holds at most one) whenever
// completions may be ready to poll; pass it as mptx.LoopConfig.Wake. The
// channel is never closed.
type Notifier = qp.Notifier

// PathConfig configures one path of a Conn.
type PathConfig struct {
	// Remote is the receiver's "host:port" for this path; "" means the
	// address passed to Dial.
	Remote string
	// Local, if valid, is the source address the path's socket binds to
	// (the port is chosen by the kernel, so every path has its own).
	Local netip.Addr
	// Interface, if set, binds the path's socket to this network
	// interface (SO_BINDTODEVICE, socket(7); Linux only, needs
	// CAP_NET_RAW).
	Interface string
	// LineRate is reported in PathInfo; 0 means DefaultLineRate.
	LineRate units.BitRate
	// NIC is the local NIC index reported in PathInfo (0..MaxPaths-1);
	// paths with the same NIC share a port pacer in the engine.
	NIC int
}

// DialConfig configures Dial.
type DialConfig struct {
	// Secret is the shared secret, at least MinSecret random bytes (see
	// Secrets in the package doc).
	Secret []byte
	// Paths has one entry per path (1..MaxPaths); a zero PathConfig dials
	// Dial's address from a kernel-chosen source.
	Paths []PathConfig
	// SendRegion is the send region; SendWR.Local offsets index it. Nil
	// is valid when every work request has Len 0.
	SendRegion []byte
	// MaxSendWR is the send queue depth per path (2..65536); 0 means
	// DefaultMaxSendWR.
	MaxSendWR int
	// RetryTimeout is each path's TCP_USER_TIMEOUT (tcp(7)): data left
	// unacknowledged that long breaks the path, as exhausting an RC QP's
	// retry count does. 0 means DefaultRetryTimeout; negative keeps the
	// kernel's default (minutes).
	RetryTimeout time.Duration
	// ResetTimeout bounds one Reset: the new connection and its handshake
	// (>= 0); 0 means DefaultHandshakeTimeout. Reset blocks the driver's
	// goroutine for at most this long when the receiver cannot be reached.
	ResetTimeout time.Duration
	// Checksum makes each path's writer compute the CRC32C of every
	// OpWrite and OpWriteImm payload as it sends it and report it in the
	// WR's successful completion (qp.Completion.Sum, HasSum). The writer
	// sends all but the last sumTail bytes of a payload a piece of at most
	// sumPiece at a time and checksums each piece right after writing it,
	// while the kernel's copy has left it in the core's cache, and the
	// tail (a short payload's whole) just before writing it, so that the
	// sum is complete before the receiver can acknowledge the WR.
	Checksum bool
}

type pathState uint8

// Sender path states.
const (
	// stateReady: frames flow.
	stateReady pathState = iota
	// stateError: the receiver NAKed a WR (remote access error). As for an
	// RC queue pair in the error state, posted WRs complete with
	// StatusFlushed; the writer has half-closed the connection. Reset
	// brings the path back to stateReady.
	stateError
	// stateBroken: the connection failed. The first WR completed after the
	// failure gets StatusRetryExceeded (or StatusFatal), later ones
	// StatusFlushed. Reset brings the path back to stateReady.
	stateBroken
)

// Conn is the sender's side of a connection: Paths() TCP connections to one
// Receiver. It implements qp.Conn, qp.Resetter, qp.SendRegions and
// Notifier.
//
// Its qp.Conn methods and Reset must be called from one goroutine at a time
// (the driver's); AddSendRegion, RemoveSendRegion, Notify, PathBytes,
// RegionSize and ID are safe for concurrent use. The zero value is not usable; get one from Dial.
type Conn struct {
	id         ConnID
	region     []byte
	regionSize units.Bytes
	maxWR      int
	infos      []qp.PathInfo
	paths      []*sendPath
	notify     chan struct{}
	done       chan struct{}
	wg         sync.WaitGroup
	avail      atomic.Int64 // completions in cq, read without the lock by Poll
	isClosed   atomic.Bool

	// What Reset needs to dial a path again.
	key          []byte       // the handshake key (deriveKey)
	remotes      []string     // per path
	pcfgs        []PathConfig // per path
	rqpns        []uint32     // the receiver's QPN per path
	retryTimeout time.Duration
	resetTimeout time.Duration

	regs sendreg.Table // qp.SendRegions
	sum  bool          // DialConfig.Checksum

	mu     sync.Mutex
	closed bool        // guarded by mu
	cq     cqring.Ring // guarded by mu; sized so that it cannot overflow
}

var (
	_ qp.Conn        = (*Conn)(nil)
	_ qp.Resetter    = (*Conn)(nil)
	_ qp.SendRegions = (*Conn)(nil)
	_ Notifier       = (*Conn)(nil)
)

// sendPath is one path of a Conn.
type sendPath struct {
	c        *Conn
	idx      int
	qpn      uint32
	doorbell chan struct{}
	// wg counts the writer and reader of the path's current connection;
	// Reset waits for them before it starts the next pair.
	wg sync.WaitGroup

	// conn is the path's current connection: written by Reset with c.mu
	// held, read by the driver's goroutine. The path goroutines use the
	// connection they were started with.
	conn *net.TCPConn

	// Guarded by c.mu. The send queue is a ring: sq[head] is the oldest
	// WR not yet completed, n WRs are outstanding, the first sent of them
	// have been handed to the writer. seqHead is sq[head]'s sequence
	// number. cqPending counts this path's completions not yet polled:
	// they still hold send queue slots.
	sq       []qp.SendWR
	sqData   [][]byte // sq[i]'s payload, resolved by PostSend; nil once completed
	answered []bool   // sq[i] is a READ whose response has landed: only then may it complete successfully
	// sums[i] is the CRC32C of sq[i]'s payload (Conn.sum): stored by the
	// writer before the payload's last byte is written, so it is complete
	// by the time the receiver acknowledges the WR (that causality runs
	// through the network, hence the atomic).
	sums        []atomic.Uint32
	head        int
	n           int
	sent        int
	seqHead     uint32
	cqPending   int
	state       pathState
	retryIssued bool
	resetting   bool // a Reset is under way
	// fencing: a Reset of a path with work outstanding is asking the
	// receiver to fence the path's connection. Meanwhile the writer sends
	// nothing more, acknowledgements complete nothing (the latest is kept
	// in fenceAck, a NAK in fenceNak, for a Reset that fails) and a
	// failure of the connection completes nothing (its status is kept in
	// fenceFail): once the fence holds, every outstanding WR completes
	// with StatusFlushed.
	fencing   bool
	fenceAck  uint32 // 0: none
	fenceNak  uint32 // 0: none
	fenceFail qp.Status
	acked     units.Bytes
	// Retransmits of the path's failed connections (TCP_INFO read before
	// they were closed), so that Counters stays cumulative across Reset;
	// harvested is the last connection counted.
	retransBase uint64
	harvested   *net.TCPConn

	// Owned by the writer goroutine.
	hdrs  []([hdrMax]byte)
	iov   [][]byte
	bufs  net.Buffers
	batch []int    // the send queue slots of the WRs in iov
	out   [][]byte // writeSummed's next writev

	// Owned by the reader goroutine.
	br      *bufio.Reader
	ack     [ackLen]byte
	respN   [respLen - ackLen]byte // a READ response's length
	scratch []byte                 // a READ response's bytes on their way to their destination

	// READ responses land in their work requests' memory only while
	// landOn is the connection they arrive on, and only under dmu: a
	// failure or a fence clears landOn and takes dmu once (waiting for a
	// copy in progress) before it completes the work requests, so that no
	// byte of a READ lands once its completion can be seen.
	landOn atomic.Pointer[net.TCPConn]
	dmu    sync.Mutex
}

// respPiece is the most READ response bytes the reader copies at once
// (through scratch, under dmu).
const respPiece = 256 << 10

var qpnSeq atomic.Uint32

// nextQPN returns a process-unique (modulo 2^24) 24-bit queue pair number.
func nextQPN() uint32 { return 0x100 + (qpnSeq.Add(1)-1)%(1<<24-0x100) }

func (cfg *DialConfig) validate(addr string) error {
	if err := checkSecret(cfg.Secret); err != nil {
		return err
	}
	if n := len(cfg.Paths); n < 1 || n > MaxPaths {
		return fmt.Errorf("tcp: DialConfig.Paths has %d paths (valid: 1..%d)", n, MaxPaths)
	}
	if cfg.MaxSendWR != 0 && (cfg.MaxSendWR < 2 || cfg.MaxSendWR > 1<<16) {
		return fmt.Errorf("tcp: DialConfig.MaxSendWR = %d (valid: 0 for %d, or 2..65536)", cfg.MaxSendWR, DefaultMaxSendWR)
	}
	if cfg.ResetTimeout < 0 {
		return fmt.Errorf("tcp: DialConfig.ResetTimeout = %v (valid: 0 for %v, or > 0)", cfg.ResetTimeout, DefaultHandshakeTimeout)
	}
	for i, p := range cfg.Paths {
		if p.Remote == "" && addr == "" {
			return fmt.Errorf("tcp: DialConfig.Paths[%d].Remote is empty and so is Dial's address (valid: host:port)", i)
		}
		if p.LineRate < 0 {
			return fmt.Errorf("tcp: DialConfig.Paths[%d].LineRate = %d bit/s (valid: 0 for %v, or > 0)", i, p.LineRate, DefaultLineRate)
		}
		if p.NIC < 0 || p.NIC >= MaxPaths {
			return fmt.Errorf("tcp: DialConfig.Paths[%d].NIC = %d (valid: 0..%d)", i, p.NIC, MaxPaths-1)
		}
	}
	return nil
}

// Dial opens a connection to the Listener at addr: one TCP connection per
// cfg.Paths entry, each authenticated (see the package doc). It returns when
// the receiver has accepted the connection (Listener.Accept) or ctx ends; a
// ctx without a deadline gets DefaultHandshakeTimeout. A receiver that does
// not know the secret yields an error wrapping ErrAuth.
func Dial(ctx context.Context, addr string, cfg DialConfig) (*Conn, error) {
	if err := cfg.validate(addr); err != nil {
		return nil, err
	}
	key, err := deriveKey(cfg.Secret)
	if err != nil {
		return nil, err
	}
	if cfg.MaxSendWR == 0 {
		cfg.MaxSendWR = DefaultMaxSendWR
	}
	if cfg.RetryTimeout == 0 {
		cfg.RetryTimeout = DefaultRetryTimeout
	}
	if cfg.ResetTimeout == 0 {
		cfg.ResetTimeout = DefaultHandshakeTimeout
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultHandshakeTimeout)
		defer cancel()
	}
	n := len(cfg.Paths)
	var id ConnID
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("tcp: random connection id: %w", err)
	}
	conns := make([]*net.TCPConn, 0, n)
	stops := make([]func() bool, 0, n)
	fail := func(err error) (*Conn, error) {
		for _, stop := range stops {
			stop()
		}
		for _, c := range conns {
			c.Close()
		}
		return nil, err
	}
	binds := make([]binding, n)
	remotes := make([]string, n)
	deadline, _ := ctx.Deadline()
	for i, pc := range cfg.Paths {
		remotes[i] = pc.Remote
		if remotes[i] == "" {
			remotes[i] = addr
		}
		tc, err := dialPath(ctx, remotes[i], pc)
		if err != nil {
			return fail(fmt.Errorf("tcp: path %d: %w", i, err))
		}
		conns = append(conns, tc)
		_ = tc.SetDeadline(deadline)
		stops = append(stops, context.AfterFunc(ctx, func() { _ = tc.SetDeadline(time.Unix(1, 0)) }))
		binds[i] = binding{id: id, index: uint16(i), count: uint16(n)}
		if err := clientHello(ctx, tc, key, &binds[i]); err != nil {
			return fail(err)
		}
	}
	var region uint64
	rqpn := make([]uint32, n)
	for i, tc := range conns {
		r, q, err := clientVerdict(ctx, tc, key, &binds[i])
		if err != nil {
			return fail(err)
		}
		if i > 0 && r != region {
			return fail(fmt.Errorf("%w: path %d reports a %d-byte region, path 0 %d bytes", ErrProtocol, i, r, region))
		}
		region, rqpn[i] = r, q
	}
	ended := false
	for _, stop := range stops {
		if !stop() {
			// ctx ended: its past deadline may be set on a socket.
			ended = true
		}
	}
	stops = nil
	if ended {
		return fail(fmt.Errorf("tcp: dial %s: %w", addr, ctx.Err()))
	}
	c := &Conn{
		id: id, region: cfg.SendRegion, regionSize: units.Bytes(region), maxWR: cfg.MaxSendWR,
		infos: make([]qp.PathInfo, n), paths: make([]*sendPath, n),
		notify: make(chan struct{}, 1), done: make(chan struct{}),
		key: key, remotes: remotes,
		pcfgs: append([]PathConfig(nil), cfg.Paths...), rqpns: rqpn,
		retryTimeout: cfg.RetryTimeout, resetTimeout: cfg.ResetTimeout, sum: cfg.Checksum,
	}
	c.cq.Init(n * cfg.MaxSendWR)
	for i, tc := range conns {
		if err := readyPath(tc, cfg.RetryTimeout); err != nil {
			return fail(fmt.Errorf("tcp: path %d: %w", i, err))
		}
		rtt, mss, _, _ := tcpInfo(tc)
		pc := cfg.Paths[i]
		info := qp.PathInfo{QPN: nextQPN(), Device: "tcp", Port: 1, NIC: pc.NIC, LineRate: pc.LineRate, BaseRTT: rtt}
		if pc.Interface != "" {
			info.Device = pc.Interface
		}
		if info.LineRate == 0 {
			info.LineRate = DefaultLineRate
		}
		if mss > 0 && mss <= 1<<16 {
			info.MTU = units.Bytes(mss)
		}
		if la, ok := tc.LocalAddr().(*net.TCPAddr); ok {
			info.SrcPort = uint16(la.Port)
		}
		c.infos[i] = info
		c.paths[i] = &sendPath{
			c: c, idx: i, conn: tc, qpn: info.QPN, doorbell: make(chan struct{}, 1),
			sq: make([]qp.SendWR, cfg.MaxSendWR), sqData: make([][]byte, cfg.MaxSendWR), answered: make([]bool, cfg.MaxSendWR), sums: make([]atomic.Uint32, cfg.MaxSendWR), seqHead: 1,
			hdrs: make([][hdrMax]byte, maxBatch), iov: make([][]byte, 0, 2*maxBatch),
			batch: make([]int, maxBatch), out: make([][]byte, 0, 2*maxBatch),
			br: bufio.NewReaderSize(tc, 4096),
		}
	}
	for _, p := range c.paths {
		c.start(p, p.conn)
	}
	return c, nil
}

// dialPath opens one path connection to remote from pc's source address
// and interface, from a port the kernel chooses.
func dialPath(ctx context.Context, remote string, pc PathConfig) (*net.TCPConn, error) {
	d := net.Dialer{Control: bindToDevice(pc.Interface)}
	if pc.Local.IsValid() {
		d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(pc.Local, 0))
	}
	nc, err := d.DialContext(ctx, "tcp", remote)
	if err != nil {
		return nil, err
	}
	return nc.(*net.TCPConn), nil
}

// readyPath readies an authenticated path connection for frames: no
// deadline, TCP_NODELAY, TCP_USER_TIMEOUT.
func readyPath(tc *net.TCPConn, retry time.Duration) error {
	_ = tc.SetDeadline(time.Time{})
	if err := tc.SetNoDelay(true); err != nil {
		return fmt.Errorf("TCP_NODELAY: %w", err)
	}
	return setUserTimeout(tc, retry)
}

// start starts p's writer and reader on conn. Called before the Conn is
// returned, or by Reset with c.mu held and the Conn open.
func (c *Conn) start(p *sendPath, conn *net.TCPConn) {
	p.landOn.Store(conn)
	p.wg.Add(2)
	c.wg.Add(2)
	go p.writeLoop(conn)
	go p.readLoop(conn)
}

// ID returns the connection id the handshake used.
func (c *Conn) ID() ConnID { return c.id }

// RegionSize returns the size of the receiver's region, as it advertised
// during the handshake. Writes beyond it fail with StatusRemoteAccess.
func (c *Conn) RegionSize() units.Bytes { return c.regionSize }

// Notify implements Notifier: the channel receives a value when send
// completions may be ready.
func (c *Conn) Notify() <-chan struct{} { return c.notify }

// Paths implements qp.Conn. SrcPort is each connection's local TCP port,
// BaseRTT the kernel's smoothed RTT after the handshake (TCP_INFO), MTU the
// TCP MSS, all as dialed: the slice does not change when Reset replaces a
// path's connection (see LocalAddr).
func (c *Conn) Paths() []qp.PathInfo { return c.infos }

// LocalAddr returns the local address of path i's current connection.
func (c *Conn) LocalAddr(i int) net.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paths[i].conn.LocalAddr()
}

// PathBytes returns the payload bytes the receiver acknowledged on path i.
func (c *Conn) PathBytes(i int) units.Bytes {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paths[i].acked
}

// Caps implements qp.Conn.
func (c *Conn) Caps() qp.Caps {
	return qp.Caps{CarriesData: true, MaxSendWR: c.maxWR, MaxMessageBytes: MaxMessageBytes, Read: true}
}

// Counters implements qp.Conn: Retransmits is the path's
// tcpi_total_retrans (TCP_INFO, tcp(7)) on Linux, summed over the
// connections Reset replaced, 0 elsewhere; ECNMarked and CNPReceived are
// always 0 (Caps says so). It makes a system call and allocates, so the
// driver does not call it for this backend.
func (c *Conn) Counters(path int) (qp.Counters, error) {
	if path < 0 || path >= len(c.paths) {
		return qp.Counters{}, fmt.Errorf("tcp: Counters: path %d out of range [0, %d)", path, len(c.paths))
	}
	p := c.paths[path]
	c.mu.Lock()
	closed, conn, base, counted := c.closed, p.conn, p.retransBase, p.harvested == p.conn
	c.mu.Unlock()
	if closed {
		return qp.Counters{}, qp.ErrClosed
	}
	if counted {
		// The path failed and its connection is counted in base.
		return qp.Counters{Retransmits: base}, nil
	}
	_, _, retrans, err := tcpInfo(conn)
	if err != nil {
		return qp.Counters{}, fmt.Errorf("tcp: Counters(path %d): %w", path, err)
	}
	return qp.Counters{Retransmits: base + retrans}, nil
}

// Close implements qp.Conn: it closes every path's connection, waits for
// the path goroutines to end and drops outstanding completions. It is
// idempotent.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.isClosed.Store(true)
	close(c.done)
	for _, p := range c.paths {
		p.conn.Close()
	}
	c.mu.Unlock()
	c.wg.Wait()
	return nil
}
