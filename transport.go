package mptx

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/tcp"
	"github.com/mptx-dev/mptx/qp/verbs"
	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// VerbsConfig configures the verbs transport (RoCEv2 RC queue pairs through
// libibverbs, package qp/verbs). Zero fields take the documented defaults.
type VerbsConfig struct {
	// Host, if set, is an opened verbs host: the session uses its NICs,
	// takes its send buffer or region from the host's pool (Host.Alloc)
	// and registers Config.Region with it (Host.Register). The caller
	// closes the host after every session using it has ended and its
	// tensors are released. nil: the session opens a host of its own
	// (verbs.OpenHost with Devices, GIDIndex and HugePages, its pool sized
	// to the send buffer or the region) and closes it once the session has
	// ended and its last tensor is released.
	Host *verbs.Host
	// Devices names the NICs a session's own host opens, as "dev" or
	// "dev:port" ("rxe0", "mlx5_1:1"); empty: every ACTIVE port with a
	// RoCEv2 GID (verbs.HostConfig.Devices). A sender's path p uses its
	// NIC p / QPsPerNIC and lands on the receiver's NIC of the same index
	// modulo the receiver's NICs (rail-aligned).
	Devices []string
	// GIDIndex picks the source GID (verbs.HostConfig.GIDIndex); 0 means
	// the first RoCEv2 GID holding an IPv4-mapped address.
	GIDIndex int
	// HugePages selects hugetlb pages for a session's own pool.
	HugePages verbs.HugePolicy
	// QPsPerNIC is the sender's number of RC queue pairs (paths) per NIC
	// (1..verbs.MaxQPsPerNIC); 0 spreads Config.Paths over the NICs,
	// rounded up.
	QPsPerNIC int
	// QP holds the queue-pair settings (ACK timeout, retry counts, MTU,
	// traffic class), for both ends.
	QP verbs.QPConfig
	// Access selects how the receiver exposes its region
	// (verbs.ListenConfig.Access); default AccessAuto.
	Access verbs.Access
	// RTTProbes is how many zero-length probes the sender sends on each
	// path at set-up (verbs.DialConfig.RTTProbes): they measure the empty
	// path's RTT and prove that every path reaches the receiver before
	// the session starts (under TransportAuto, a path that does not makes
	// the session fall back to TCP). 0 means 3; negative disables them.
	RTTProbes int
}

// link is what a transport's set-up hands the session.
type link struct {
	conn qp.Conn     // the sending end's connection
	recv qp.Receiver // the receiving end's
	mem  []byte      // the send buffer or the receive region
	// in, when set, delivers the session's control frames (the channel is
	// shared with the transport through a bootstrap.Mux); nil: the
	// session's reader reads the bootstrap session itself.
	in *bootstrap.Inbox
	// free, when set, frees mem (registered memory, and a host the
	// session opened) once nothing can touch it any more (memHold).
	free func()
	// clock, when set, is the clock the backend stamps completions
	// with: the session's driver must read the same one.
	clock *vtime.Monotonic
}

// close undoes a link whose session never started.
func (l *link) close() {
	if l.conn != nil {
		l.conn.Close()
	}
	if l.recv != nil {
		l.recv.Close()
	}
	if l.free != nil {
		l.free()
	}
}

// memHold keeps a session's registered memory (the send buffer, the
// receive region; link.free) alive while anything may still touch it:
//
//   - the session itself, until its loop has stopped and the backend's
//     queue pairs are destroyed (the NIC reads or writes the memory until
//     then);
//   - a sender goroutine staging a tensor (SendAsync copies into the send
//     buffer on the caller's goroutine, which may outlast the session);
//   - each received Tensor, from the receiver's check until Release (its
//     Data points into the region).
//
// The last one to drop runs free. A nil *memHold (Go memory, which the
// collector reclaims) holds nothing and always acquires. It is safe for
// concurrent use.
type memHold struct {
	mu   sync.Mutex
	n    int
	free func()
}

// newMemHold returns a hold held once, by the session; nil when there is
// nothing to free.
func newMemHold(free func()) *memHold {
	if free == nil {
		return nil
	}
	return &memHold{n: 1, free: free}
}

// acquire adds a holder; it reports false once the memory is freed.
func (h *memHold) acquire() bool {
	if h == nil {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return false
	}
	h.n++
	return true
}

// drop removes a holder, freeing the memory after the last.
func (h *memHold) drop() {
	if h == nil {
		return
	}
	h.mu.Lock()
	if h.n <= 0 {
		h.mu.Unlock()
		panic("mptx: BUG: memHold dropped more often than acquired")
	}
	h.n--
	free := h.n == 0
	h.mu.Unlock()
	if free {
		h.free()
	}
}

// verbsUsable reports nil when this host can run a session over verbs
// with cfg, else why not: this build has no verbs (no cgo or not Linux),
// there is no usable RDMA device, Config.Verbs.Devices names one that is
// not, or Config.Verbs.Host has no NIC open.
func verbsUsable(cfg *Config) error {
	if h := cfg.Verbs.Host; h != nil {
		if len(h.NICs()) == 0 {
			return errors.New("mptx: Config.Verbs.Host has no NIC open")
		}
		return nil
	}
	return verbs.Usable(verbs.HostConfig{Devices: cfg.Verbs.Devices, GIDIndex: cfg.Verbs.GIDIndex})
}

// verbsTransport is the verbs transport's set-up, as the session layer
// calls it; the fallback tests replace it to fail on cue on hosts without
// RDMA devices.
var verbsTransport = struct {
	usable func(*Config) error
	dial   func(context.Context, *bootstrap.Session, *Config) (link, error)
	accept func(context.Context, *bootstrap.Session, *Config) (link, error)
}{verbsUsable, dialVerbs, acceptVerbs}

// canFallBack reports whether an end set to cfg may fall back to TCP
// after a failed verbs set-up (auto on both ends: peerTCP says the peer
// offered or accepts TCP).
func canFallBack(cfg *Config, peerTCP bool) bool {
	return cfgTransport(*cfg) == TransportAuto && peerTCP
}

// peerFellBack reports whether err is the peer's NoVerbs frame, which
// arrived where the verbs set-up expected its next message.
func peerFellBack(err error) bool {
	var fe *bootstrap.FrameError
	return errors.As(err, &fe) && fe.Type == msgNoVerbs
}

// fallBack tells the peer that the verbs set-up failed here (why) and the
// session goes on over TCP, unless the failure was the peer's own
// NoVerbs.
func fallBack(ctx context.Context, bs *bootstrap.Session, why error) error {
	if peerFellBack(why) {
		return nil
	}
	m := idMsg{Err: errText(why)}
	if err := bs.WriteApp(ctx, msgNoVerbs, m.marshal()); err != nil {
		return fmt.Errorf("mptx: telling the receiver verbs failed (%v): %w", why, err)
	}
	return nil
}

// dialTransport connects the sending end's data paths over the transport
// the receiver's Welcome chose. Under TransportAuto a failed verbs set-up
// on either end (no reachable path, a resource the NIC refused) falls back
// to TCP on the same control channel (NoVerbs, then the receiver's
// Welcome for TCP); with TransportVerbs it fails with the reason.
func dialTransport(ctx context.Context, bs *bootstrap.Session, addr string, w welcome, cfg *Config) (Transport, link, error) {
	if w.Transport == transportVerbs {
		l, err := verbsTransport.dial(ctx, bs, cfg)
		if err == nil {
			return TransportVerbs, l, nil
		}
		if !canFallBack(cfg, true) || errors.Is(err, bootstrap.ErrAborted) || ctx.Err() != nil {
			return "", link{}, fmt.Errorf("mptx: %s: setting up the verbs paths: %w", addr, err)
		}
		if ferr := fallBack(ctx, bs, err); ferr != nil {
			return "", link{}, ferr
		}
		t, payload, rerr := bs.ReadApp(ctx)
		if rerr != nil {
			return "", link{}, fmt.Errorf("mptx: %s: waiting for Welcome after verbs failed (%v): %w", addr, err, rerr)
		}
		if t != msgWelcome {
			return "", link{}, fmt.Errorf("mptx: %s: got message %d after verbs failed, want Welcome", addr, t)
		}
		w = welcome{}
		if err := w.unmarshal(payload); err != nil {
			return "", link{}, err
		}
		if w.Transport != transportTCP {
			return "", link{}, fmt.Errorf("mptx: %s: the receiver's Welcome after verbs failed names transport %d, want tcp", addr, w.Transport)
		}
	}
	conn, send, err := dialTCP(ctx, addr, w.DataAddr, cfg)
	if err != nil {
		return "", link{}, err
	}
	return TransportTCP, link{conn: conn, mem: send}, nil
}

// acceptTransport sets the receiving end's data paths up over tr (chosen
// from the sender's Hello), falling back from verbs to TCP as
// dialTransport describes.
func acceptTransport(ctx context.Context, bs *bootstrap.Session, h *hello, tr uint8, dataHost string, cfg *Config) (Transport, link, error) {
	if tr == transportVerbs {
		l, err := verbsTransport.accept(ctx, bs, cfg)
		if err == nil {
			return TransportVerbs, l, nil
		}
		if !canFallBack(cfg, h.Transports&transportTCP != 0) || errors.Is(err, bootstrap.ErrAborted) || ctx.Err() != nil {
			return "", link{}, fmt.Errorf("mptx: setting up the verbs paths: %w", err)
		}
		if !errors.Is(err, errNoWelcome) {
			if ferr := fallBack(ctx, bs, err); ferr != nil {
				return "", link{}, ferr
			}
		}
	}
	// Over TCP the region is Go memory: the caller's, or one from
	// regionPool, which goes back there once nothing can touch it.
	region := cfg.Region
	var free func()
	if region == nil {
		size := units.Bytes(regionSize(cfg))
		if region = getRegion(size); region == nil {
			region = makeRegion(int64(size))
		}
		free = func() { putRegion(region) }
	}
	recv, err := acceptTCP(ctx, bs, dataHost, int(h.Paths), region, cfg)
	if err != nil {
		if free != nil {
			free()
		}
		return "", link{}, err
	}
	return TransportTCP, link{recv: recv, mem: region, free: free}, nil
}

// errNoWelcome marks a verbs set-up that failed before the receiver sent
// its Welcome: the sender knows nothing of it yet, so a fallback needs no
// NoVerbs frame, only the Welcome for TCP.
var errNoWelcome = errors.New("mptx: verbs not set up (no Welcome sent)")

// regionSize is the receiving end's region size under cfg.
func regionSize(cfg *Config) int64 {
	switch {
	case cfg.Region != nil:
		return int64(len(cfg.Region))
	case cfg.RegionSize > 0:
		return int64(cfg.RegionSize)
	}
	return int64(DefaultRegionSize)
}

// dialTCP connects the sender's TCP paths to the receiver's data port
// (dataAddr ":port" from Welcome, on the host of the control address addr
// unless a path names its own Remote) and returns the connection and its
// send buffer.
func dialTCP(ctx context.Context, addr, dataAddr string, cfg *Config) (qp.Conn, []byte, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("mptx: control address %q: %w", addr, err)
	}
	_, port, err := net.SplitHostPort(dataAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("mptx: the receiver's data address %q: %w", dataAddr, err)
	}
	paths := make([]tcp.PathConfig, cfg.paths())
	for i := range paths {
		var p TCPPath
		if i < len(cfg.TCP.Paths) {
			p = cfg.TCP.Paths[i]
		}
		h := host
		if p.Remote != "" {
			h = p.Remote
		}
		paths[i] = tcp.PathConfig{Remote: net.JoinHostPort(h, port), Interface: p.Interface, LineRate: p.LineRate, NIC: p.NIC}
		if p.Local != "" {
			a, err := netip.ParseAddr(p.Local)
			if err != nil {
				return nil, nil, fmt.Errorf("mptx: Config.TCP.Paths[%d].Local = %q: %w", i, p.Local, err)
			}
			paths[i].Local = a
		}
	}
	send := make([]byte, sendRegionSize(cfg)) // staging, then the pool (session_alloc.go)
	c, err := tcp.Dial(ctx, net.JoinHostPort(host, port), tcp.DialConfig{Secret: cfg.Secret, Paths: paths, SendRegion: send, RetryTimeout: cfg.TCP.RetryTimeout,
		Checksum: !cfg.NoChecksum})
	if err != nil {
		return nil, nil, fmt.Errorf("mptx: connecting the TCP paths: %w", err)
	}
	return c, send, nil
}

// tcpReceiver is a session's qp/tcp Receiver with its data listener, which
// stays open while the session lives: a path that the sender fences or
// brings back (tcp.Conn.Reset) rejoins through it. Close closes both.
type tcpReceiver struct {
	*tcp.Receiver
	ln *tcp.Listener
}

func (r *tcpReceiver) Close() error {
	err := r.Receiver.Close()
	r.ln.Close()
	return err
}

// acceptTCP opens a data listener for this session alone (so its paths
// cannot be confused with another session's) on host (the session
// listener's host), tells the sender its port (Welcome) and accepts the
// sender's paths into region. The listener stays open for the paths'
// rejoins until the Receiver is closed.
func acceptTCP(ctx context.Context, bs *bootstrap.Session, host string, paths int, region []byte, cfg *Config) (qp.Receiver, error) {
	ln, err := tcp.Listen(net.JoinHostPort(host, "0"), tcp.ListenConfig{Secret: cfg.Secret, RetryTimeout: cfg.TCP.RetryTimeout, MaxPending: paths + 8,
		Checksum: !cfg.NoChecksum})
	if err != nil {
		return nil, fmt.Errorf("mptx: data listener: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			ln.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	w := welcome{Transport: transportTCP, DataAddr: net.JoinHostPort("", port), RegionSize: uint64(len(region))}
	if err := bs.WriteApp(ctx, msgWelcome, w.marshal()); err != nil {
		return nil, fmt.Errorf("mptx: sending Welcome: %w", err)
	}
	r, err := ln.Accept(ctx, region)
	if err != nil {
		return nil, fmt.Errorf("mptx: accepting the sender's %d TCP paths on port %s: %w", paths, port, err)
	}
	if n := len(r.Paths()); n != paths {
		r.Close()
		return nil, fmt.Errorf("mptx: the sender connected %d TCP paths, its Hello said %d", n, paths)
	}
	ok = true
	return &tcpReceiver{Receiver: r, ln: ln}, nil
}
