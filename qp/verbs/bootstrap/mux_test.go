package bootstrap

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// sessions returns an authenticated client and server over loopback.
func authed(t *testing.T) (client, server *Session) {
	t.Helper()
	cc, sc := pair(t)
	c, s := handshake(t, secretA, secretA, cc, sc)
	if c.err != nil || s.err != nil {
		t.Fatalf("handshake: client %v, server %v", c.err, s.err)
	}
	return c.s, s.s
}

func recvWithin(t *testing.T, in *Inbox, d time.Duration) (Type, []byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return in.Recv(ctx)
}

// TestMuxRoutes: frames reach the Inbox of their type, in order, with
// their payloads; the bootstrap's own decode with Decode.
func TestMuxRoutes(t *testing.T) {
	c, s := authed(t)
	m := NewMux(s)
	verbs, err := m.Route(4, TypeResetPath, TypeTransfer)
	if err != nil {
		t.Fatal(err)
	}
	app, err := m.RouteApp(4)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.WriteApp(ctx, TypeApp, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := c.SendResetPath(ctx, &ResetPath{Path: 3, QPN: 0x11, PSN: 0x22}); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteApp(ctx, 255, []byte("last")); err != nil {
		t.Fatal(err)
	}
	if err := c.SendTransfer(ctx, &Transfer{ID: 9, Size: 100}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		t Type
		p string
	}{{TypeApp, "hello"}, {255, "last"}} {
		typ, p, err := recvWithin(t, app, 5*time.Second)
		if err != nil || typ != want.t || string(p) != want.p {
			t.Fatalf("app Recv = %v %q %v, want %v %q", typ, p, err, want.t, want.p)
		}
	}
	typ, p, err := recvWithin(t, verbs, 5*time.Second)
	if err != nil || typ != TypeResetPath {
		t.Fatalf("verbs Recv = %v, %v; want ResetPath", typ, err)
	}
	if rp, err := Decode(typ, p); err != nil || *rp.(*ResetPath) != (ResetPath{Path: 3, QPN: 0x11, PSN: 0x22}) {
		t.Fatalf("Decode(ResetPath) = %+v, %v", rp, err)
	}
	typ, p, err = recvWithin(t, verbs, 5*time.Second)
	if err != nil || typ != TypeTransfer {
		t.Fatalf("verbs Recv = %v, %v; want Transfer", typ, err)
	}
	if tr, err := Decode(typ, p); err != nil || tr.(*Transfer).ID != 9 {
		t.Fatalf("Decode(Transfer) = %+v, %v", tr, err)
	}
	if m.Err() != nil {
		t.Fatalf("Err() = %v while running", m.Err())
	}
}

// TestMuxUnroutedStops: a frame nobody takes stops the Mux with
// ErrProtocol; what was queued before is still delivered, then the error.
func TestMuxUnroutedStops(t *testing.T) {
	c, s := authed(t)
	m := NewMux(s)
	app, _ := m.RouteApp(4)
	m.Start()
	ctx := context.Background()
	c.WriteApp(ctx, TypeApp+1, []byte("queued"))
	c.SendResetAck(ctx, &ResetAck{Path: 1})
	<-m.Done()
	if err := m.Err(); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "ResetAck") {
		t.Fatalf("Err() = %v, want ErrProtocol naming ResetAck", err)
	}
	if typ, p, err := recvWithin(t, app, time.Second); err != nil || typ != TypeApp+1 || string(p) != "queued" {
		t.Fatalf("Recv after the stop = %v %q %v, want the queued frame first", typ, p, err)
	}
	if _, _, err := recvWithin(t, app, time.Second); !errors.Is(err, ErrProtocol) {
		t.Fatalf("Recv = %v, want the Mux's ErrProtocol", err)
	}
}

// TestMuxAbortReachesEveryInbox: Abort stops the Mux with ErrAborted and
// the peer's reason, for every consumer.
func TestMuxAbortReachesEveryInbox(t *testing.T) {
	c, s := authed(t)
	m := NewMux(s)
	a, _ := m.Route(1, TypeResetAck)
	b, _ := m.RouteApp(1)
	m.Start()
	c.SendAbort(context.Background(), "going away")
	for _, in := range []*Inbox{a, b} {
		if _, _, err := recvWithin(t, in, 5*time.Second); !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "going away") {
			t.Fatalf("Recv = %v, want ErrAborted with the reason", err)
		}
	}
}

// TestMuxClosedSessionStops: closing the Session stops the reader.
func TestMuxClosedSessionStops(t *testing.T) {
	_, s := authed(t)
	m := NewMux(s)
	in, _ := m.RouteApp(1)
	m.Start()
	s.Close()
	if _, _, err := recvWithin(t, in, 5*time.Second); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Recv after Close = %v, want the read error", err)
	}
}

// TestMuxClosedInboxDrops: a consumer that is gone does not stop the
// others: its frames are dropped.
func TestMuxClosedInboxDrops(t *testing.T) {
	c, s := authed(t)
	m := NewMux(s)
	gone, _ := m.Route(1, TypeResetAck)
	app, _ := m.RouteApp(1)
	m.Start()
	gone.Close()
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		if err := c.SendResetAck(ctx, &ResetAck{Path: uint16(i)}); err != nil {
			t.Fatal(err)
		}
	}
	c.WriteApp(ctx, TypeApp, []byte("after"))
	if typ, p, err := recvWithin(t, app, 5*time.Second); err != nil || typ != TypeApp || string(p) != "after" {
		t.Fatalf("app Recv = %v %q %v; want the frame behind five for a closed Inbox", typ, p, err)
	}
}

// TestMuxRecvHonoursContext: Recv returns ctx's error when nothing comes.
func TestMuxRecvHonoursContext(t *testing.T) {
	_, s := authed(t)
	m := NewMux(s)
	in, _ := m.RouteApp(1)
	m.Start()
	if _, _, err := recvWithin(t, in, 20*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Recv = %v, want context.DeadlineExceeded", err)
	}
}

func TestMuxRouteErrors(t *testing.T) {
	_, s := authed(t)
	m := NewMux(s)
	if _, err := m.Route(0, TypeResetAck); err == nil || !strings.Contains(err.Error(), "depth 0") {
		t.Errorf("Route(depth 0) = %v, want an error naming the depth", err)
	}
	if _, err := m.Route(1); err == nil {
		t.Error("Route with no type succeeded")
	}
	if _, err := m.Route(1, TypeAbort); err == nil {
		t.Error("Route(Abort) succeeded")
	}
	if _, err := m.Route(1, TypeResetAck); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Route(1, TypeTransfer, TypeResetAck); err == nil || !strings.Contains(err.Error(), "ResetAck") {
		t.Errorf("a second Route of ResetAck = %v, want an error naming it", err)
	}
	m.Start()
	if err := m.Start(); err == nil {
		t.Error("a second Start succeeded")
	}
	if _, err := m.RouteApp(1); err == nil {
		t.Error("Route after Start succeeded")
	}
}

// TestFrameErrorCarriesFrame: an application frame where a verbs message
// was awaited is a *FrameError (ErrProtocol) carrying it.
func TestFrameErrorCarriesFrame(t *testing.T) {
	c, s := authed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.WriteApp(ctx, TypeApp+9, []byte("fall back")); err != nil {
		t.Fatal(err)
	}
	err := s.RecvReady(ctx)
	var fe *FrameError
	if !errors.As(err, &fe) || !errors.Is(err, ErrProtocol) || fe.Type != TypeApp+9 || fe.Want != TypeReady || string(fe.Payload) != "fall back" {
		t.Fatalf("RecvReady = %v (%+v), want a FrameError carrying the application frame", err, fe)
	}
	if _, err := Decode(TypeApp, nil); !errors.As(err, &fe) || fe.Want != 0 {
		t.Fatalf("Decode(TypeApp) = %v, want a FrameError", err)
	}
}

// TestWriteDeadlineSparesReader: a write that times out (the peer stopped
// reading) fails alone; a concurrent read with no deadline on the same
// Session keeps waiting and then gets its frame. (Setting both deadlines
// for a write used to time the reader out with it.)
func TestWriteDeadlineSparesReader(t *testing.T) {
	c, s := authed(t)
	got := make(chan error, 1)
	go func() {
		_, _, err := c.ReadApp(context.Background())
		got <- err
	}()
	payload := make([]byte, MaxPayload)
	var werr error
	for i := 0; i < 10000 && werr == nil; i++ { // s never reads: the buffers fill
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		werr = c.WriteApp(ctx, TypeApp, payload)
		cancel()
	}
	if werr == nil {
		t.Fatal("writes never blocked")
	}
	select {
	case err := <-got:
		t.Fatalf("the reader returned %v when a concurrent write timed out", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := s.WriteApp(context.Background(), TypeApp, []byte("x")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("reader: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the reader never got the frame")
	}
}
