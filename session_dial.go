package mptx

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/mptx-dev/mptx/cc"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
	"github.com/mptx-dev/mptx/units"
)

// Dial opens a sending session to the receiver listening at addr
// (host:port, see Listen): it authenticates the control channel, agrees on
// the transport and connects the data paths. ctx bounds the whole setup.
func Dial(ctx context.Context, addr string, cfg Config) (*Session, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.timeout())
		defer cancel()
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mptx: dial %s: %w", addr, err)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	bs, err := bootstrap.Client(ctx, c, cfg.Secret)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("mptx: %s: %w", addr, err)
	}
	s, err := dialSession(ctx, bs, addr, cfg)
	if err != nil {
		bs.SendAbort(context.Background(), err.Error())
		bs.Close()
		return nil, err
	}
	return s, nil
}

func dialSession(ctx context.Context, bs *bootstrap.Session, addr string, cfg Config) (*Session, error) {
	ctrl := &ctrlConn{s: bs, timeout: cfg.timeout()}
	want := uint8(transportTCP)
	switch cfg.Transport {
	case TransportVerbs:
		if err := verbsTransport.usable(&cfg); err != nil {
			return nil, fmt.Errorf("mptx: Config.Transport is verbs, but this host cannot run verbs: %w", err)
		}
		want = transportVerbs
	case TransportAuto, "":
		if verbsTransport.usable(&cfg) == nil {
			want |= transportVerbs
		}
	}
	if cfg.SendBuffer == 0 {
		cfg.SendBuffer = DefaultSendBuffer
	}
	h := hello{Version: sessionVersion, Transports: want, Paths: uint16(cfg.paths()), MaxTensor: uint64(cfg.SendBuffer)}
	if err := bs.WriteApp(ctx, msgHello, h.marshal()); err != nil {
		return nil, fmt.Errorf("mptx: %s: sending Hello: %w", addr, err)
	}
	t, payload, err := bs.ReadApp(ctx)
	if err != nil {
		return nil, fmt.Errorf("mptx: %s: waiting for Welcome: %w", addr, err)
	}
	if t != msgWelcome {
		return nil, fmt.Errorf("mptx: %s: got message %d, want Welcome", addr, t)
	}
	var w welcome
	if err := w.unmarshal(payload); err != nil {
		return nil, err
	}
	s := &Session{cfg: cfg, ctrl: ctrl, done: make(chan struct{}), peers: bs.RemoteAddr().String()}
	tr, l, err := dialTransport(ctx, bs, addr, w, &cfg)
	if err != nil {
		return nil, err
	}
	s.tr, ctrl.in = tr, l.in
	ss, err := newSendSide(s, l.conn, l.mem, &cfg)
	if err != nil {
		l.close()
		return nil, err
	}
	if l.clock != nil {
		ss.clock = l.clock // the backend stamps completions with it
	}
	ss.hold = newMemHold(l.free)
	s.snd = ss
	go s.readLoop(ss.onCtrl)
	s.loop.Add(1)
	go func() {
		defer s.loop.Done()
		ss.run()
	}()
	return s, nil
}

// tcpEngineDefaults fills the engine settings a user left zero with what
// suits TCP paths: TCP runs its own congestion control in the kernel, so
// the engine's is a fixed, unlimited window and rate with pacing off (a
// second controller on top would only add latency); work requests of 1
// MiB (a TCP path has no per-packet completion to pace with, and a larger
// write is one syscall); chunks of 1 MiB too, so that paths of different
// speeds share a tensor in proportion to their rates (over four paths
// shaped to 50, 100, 150 and 200 Mbit/s, 4 MiB chunks reached 0.75 of
// the sum of the rates and 1 MiB chunks 0.90: BenchmarkNetnsShaped in
// qp/tcp/e2e), and a chunk is one write, whose CRC32C qp/tcp computes
// next to its copies on both ends (session_sum.go, sumTap); up to 32 MiB
// posted per path, enough for the socket buffers
// of a fast path; and a stall floor that tolerates a retransmission
// timeout (DefaultTCPMinTimeout).
func tcpEngineDefaults(c *multipath.Config) {
	if c.CC == "" && c.NewCC == nil {
		c.CC = "fixed"
		if c.CCParams == nil {
			c.CCParams = cc.Params{"window": "unlimited", "rate": "unlimited"}
		}
		c.Pacing.Disabled = true
	}
	if c.Segment == 0 {
		c.Segment = units.MiB
	}
	if c.ChunkSize == 0 {
		c.ChunkSize = units.MiB
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 32 * units.MiB
	}
	if c.MinTimeout == 0 {
		c.MinTimeout = DefaultTCPMinTimeout
	}
}
