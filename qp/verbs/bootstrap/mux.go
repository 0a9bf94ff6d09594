package bootstrap

import (
	"context"
	"fmt"
	"sync"
)

// Mux shares one Session's receiving side between several consumers: one
// goroutine reads the frames, authenticated and in order, and hands each to
// the Inbox registered for its type. An mptx session over verbs runs its
// own protocol (application frames, TypeApp and up) and the verbs
// connection's (ResetPath, ResetAck) on one control channel this way; a
// Session's receives must come from one goroutine, and two readers would
// take each other's frames.
//
// Lifecycle: NewMux wraps an authenticated Session whose owner may still
// read it directly (the verbs set-up exchange does); Route registers the
// consumers; Start launches the reader, after which nobody else may read
// the Session. The reader stops at the first error: the connection failed
// or was closed (the Session's owner closes it; the Mux never does), a
// frame failed its integrity check, the peer sent Abort (ErrAborted with
// its reason), or a frame arrived whose type has no Inbox (ErrProtocol).
// Every Inbox then returns its frames still queued, then that error.
//
// Flow control: an Inbox holds depth frames; a consumer that does not keep
// up stops the reader (TCP then stops the peer), so every consumer must
// keep reading until it is done with the channel, and Close its Inbox
// then. Sends are unaffected:
// write through Session() from any goroutine.
//
// A Mux is safe for concurrent use. Its zero value is not usable; get one
// from NewMux.
type Mux struct {
	s    *Session
	done chan struct{}

	mu      sync.Mutex
	routes  [256]*Inbox // guarded by mu until Start; read-only after
	started bool
	err     error // why the reader stopped; set before done is closed
}

// Inbox receives the frames of the types it was registered for, in the
// order they arrived. Its Recv may be called from one goroutine at a time.
type Inbox struct {
	m      *Mux
	ch     chan muxFrame
	closed chan struct{}
	once   sync.Once
}

type muxFrame struct {
	t       Type
	payload []byte
}

// NewMux returns a Mux over s, not started.
func NewMux(s *Session) *Mux {
	return &Mux{s: s, done: make(chan struct{})}
}

// Session returns the session the Mux reads; write to it freely, but read
// it only before Start.
func (m *Mux) Session() *Session { return m.s }

// Route registers a consumer for frames of the given types, which no other
// Inbox may have, with room for depth frames (1..4096). Abort is never
// routed: it stops the Mux. Route must be called before Start.
func (m *Mux) Route(depth int, types ...Type) (*Inbox, error) {
	if depth < 1 || depth > 4096 {
		return nil, fmt.Errorf("bootstrap: Mux.Route depth %d (valid: 1..4096)", depth)
	}
	if len(types) == 0 {
		return nil, fmt.Errorf("bootstrap: Mux.Route with no frame type")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started {
		return nil, fmt.Errorf("bootstrap: Mux.Route after Start")
	}
	for _, t := range types {
		if t == TypeAbort {
			return nil, fmt.Errorf("bootstrap: Mux.Route of Abort (an Abort stops the Mux)")
		}
		if m.routes[t] != nil {
			return nil, fmt.Errorf("bootstrap: Mux.Route: %s already has an Inbox", t)
		}
	}
	in := &Inbox{m: m, ch: make(chan muxFrame, depth), closed: make(chan struct{})}
	for _, t := range types {
		m.routes[t] = in
	}
	return in, nil
}

// RouteApp registers a consumer for every application frame type
// (TypeApp..255), as Route does.
func (m *Mux) RouteApp(depth int) (*Inbox, error) {
	types := make([]Type, 0, 256-int(TypeApp))
	for t := int(TypeApp); t < 256; t++ {
		types = append(types, Type(t))
	}
	return m.Route(depth, types...)
}

// Start launches the reader goroutine. It may be called once.
func (m *Mux) Start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started {
		return fmt.Errorf("bootstrap: Mux.Start called twice")
	}
	m.started = true
	go m.run()
	return nil
}

// Done is closed when the reader has stopped; Err then says why.
func (m *Mux) Done() <-chan struct{} { return m.done }

// Err returns why the reader stopped, nil while it runs.
func (m *Mux) Err() error {
	select {
	case <-m.done:
		return m.err
	default:
		return nil
	}
}

func (m *Mux) run() {
	err := m.loop()
	m.err = err
	close(m.done)
}

func (m *Mux) loop() error {
	ctx := context.Background() // the Session's owner closes it to stop us
	for {
		t, payload, err := m.s.readFrame(ctx)
		if err != nil {
			return err
		}
		if t == TypeAbort {
			d := &dec{b: payload}
			return fmt.Errorf("%w: %s", ErrAborted, d.str())
		}
		in := m.routes[t]
		if in == nil {
			return fmt.Errorf("%w: unexpected %s frame (no consumer on this channel)", ErrProtocol, t)
		}
		select {
		case in.ch <- muxFrame{t: t, payload: payload}:
		case <-in.closed:
		}
	}
}

// Close tells the Mux that this consumer is gone: frames of its types are
// dropped from now on instead of stopping the reader when the Inbox is
// full. It is idempotent.
func (in *Inbox) Close() { in.once.Do(func() { close(in.closed) }) }

// Recv returns the next frame routed to this Inbox: its type and payload,
// uninterpreted (Decode decodes the bootstrap's own). Once the Mux has
// stopped, it returns the frames still queued and then the Mux's error.
// It returns ctx's error when ctx ends first.
func (in *Inbox) Recv(ctx context.Context) (Type, []byte, error) {
	select {
	case f := <-in.ch:
		return f.t, f.payload, nil
	default:
	}
	select {
	case f := <-in.ch:
		return f.t, f.payload, nil
	case <-in.m.done:
		select {
		case f := <-in.ch:
			return f.t, f.payload, nil
		default:
		}
		return 0, nil, in.m.err
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	}
}
