package bootstrap

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// listen starts a Listener on loopback, closed (and checked for leftover
// goroutines) by t's cleanups. Its rejections are recorded in rejects.
func listen(t *testing.T, cfg ListenConfig) (*Listener, *rejects) {
	t.Helper()
	rj := &rejects{}
	cfg.Secret = secretA
	cfg.OnReject = rj.add
	l, err := Listen("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		noListenerGoroutines(t)
	})
	return l, rj
}

type rejects struct {
	mu   sync.Mutex
	errs []error
}

func (r *rejects) add(_ net.Addr, err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

// wait waits until n rejections were reported and returns them.
func (r *rejects) wait(t *testing.T, n int) []error {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		errs := append([]error(nil), r.errs...)
		r.mu.Unlock()
		if len(errs) >= n {
			return errs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rejections reported (%v), want %d", len(errs), errs, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// noListenerGoroutines fails t if a goroutine of a Listener is still
// running (it waits up to 5 s for those that are returning).
func noListenerGoroutines(t *testing.T) {
	t.Helper()
	var left []string
	for wait := time.Millisecond; wait < 5*time.Second; wait *= 2 {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		left = left[:0]
		for _, g := range bytes.Split(buf, []byte("\n\n")) {
			if bytes.Contains(g, []byte("bootstrap.(*Listener)")) {
				left = append(left, string(g))
			}
		}
		if len(left) == 0 {
			return
		}
		time.Sleep(wait)
	}
	t.Errorf("%d Listener goroutines left after Close:\n%s", len(left), strings.Join(left, "\n\n"))
}

// idleConns opens n connections to l from the loopback address src and
// sends nothing on them (slowloris). They close with the test.
func idleConns(t *testing.T, l *Listener, src string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(src), 0))}
		c, err := d.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
}

// offerer connects to l as a real client: it authenticates and sends an
// Offer naming name. It returns the client's Session.
func offerer(t *testing.T, ctx context.Context, l *Listener, name string) (*Session, error) {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := Client(ctx, c, secretA)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { s.Close() })
	return s, s.SendOffer(ctx, &Offer{Size: 1, Name: name, Paths: []Endpoint{{QPN: 1}}})
}

// TestListenerSlowloris: peers open connections and never send a byte,
// and the handshake timeout is an hour. A real client still authenticates
// and Accept returns it at once: a Listener that authenticated one
// connection at a time would wait an hour for each idle one first.
func TestListenerSlowloris(t *testing.T) {
	l, _ := listen(t, ListenConfig{HandshakeTimeout: time.Hour})
	idleConns(t, l, "127.0.0.2", 5)
	idleConns(t, l, "127.0.0.3", 5)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := offerer(t, ctx, l, "real"); err != nil {
		t.Fatalf("the real client: %v", err)
	}
	s, offer, err := l.Accept(ctx)
	if err != nil {
		t.Fatalf("Accept with idle connections pending: %v", err)
	}
	defer s.Close()
	if offer.Name != "real" {
		t.Fatalf("Accept returned the Offer of %q, want the real client's", offer.Name)
	}
}

// TestListenerDropsSilentClient: a client that authenticates and then
// sends no Offer is dropped when HandshakeTimeout passes (its connection
// is closed and OnReject says why), and does not delay the next client.
func TestListenerDropsSilentClient(t *testing.T) {
	l, rj := listen(t, ListenConfig{HandshakeTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	silent, err := Client(ctx, c, secretA)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if _, err := offerer(t, ctx, l, "next"); err != nil {
		t.Fatal(err)
	}
	s, offer, err := l.Accept(ctx)
	if err != nil || offer.Name != "next" {
		t.Fatalf("Accept = %v, %v; want the client that sent its Offer", offer, err)
	}
	s.Close()
	// The silent one is dropped: its connection reaches EOF.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF && !isReset(err) {
		t.Fatalf("the silent client's connection: read %d bytes, %v; want EOF (dropped)", n, err)
	}
	errs := rj.wait(t, 1)
	if !errors.Is(errs[0], context.DeadlineExceeded) && !errors.Is(errs[0], os.ErrDeadlineExceeded) {
		t.Errorf("OnReject(silent client) = %v; want a deadline error", errs[0])
	}
	if l.Rejected() != 1 {
		t.Errorf("Rejected() = %d, want 1", l.Rejected())
	}
}

func isReset(err error) bool { return err != nil && strings.Contains(err.Error(), "reset") }

// TestListenerAdmission: one source may hold MaxPendingPerSource (2)
// unauthenticated connections, more are refused with ErrBusy; a full
// Listener (MaxPending 4) takes a real client from another source by
// evicting the oldest idle connection of the heaviest source.
func TestListenerAdmission(t *testing.T) {
	l, rj := listen(t, ListenConfig{MaxPending: 4, MaxPendingPerSource: 2, HandshakeTimeout: time.Hour})
	idleConns(t, l, "127.0.0.2", 3)
	errs := rj.wait(t, 1)
	if !errors.Is(errs[0], ErrBusy) {
		t.Fatalf("OnReject(third idle connection of one source) = %v, want ErrBusy", errs[0])
	}
	idleConns(t, l, "127.0.0.3", 2) // the Listener is full now
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := offerer(t, ctx, l, "real"); err != nil {
		t.Fatalf("the real client, with the Listener full of idle connections: %v", err)
	}
	s, _, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// TestListenerOfferWaitsForAccept: an Offer nobody accepts within
// HandshakeTimeout is dropped, not handed to a late Accept.
func TestListenerOfferWaitsForAccept(t *testing.T) {
	l, rj := listen(t, ListenConfig{HandshakeTimeout: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := offerer(t, ctx, l, "stale"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := offerer(t, ctx, l, "fresh"); err != nil {
		t.Fatal(err)
	}
	s, offer, err := l.Accept(ctx)
	if err != nil || offer.Name != "fresh" {
		t.Fatalf("Accept = %+v, %v; want the fresh Offer (the stale one waited too long)", offer, err)
	}
	s.Close()
	if errs := rj.wait(t, 1); !strings.Contains(errs[0].Error(), "waited") {
		t.Errorf("OnReject(stale Offer) = %v; want it to say the Offer waited too long", errs[0])
	}
}

func TestListenerClosed(t *testing.T) {
	l, _ := listen(t, ListenConfig{})
	idleConns(t, l, "127.0.0.2", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, _, err := l.Accept(ctx)
		errc <- err
	}()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept during Close = %v, want net.ErrClosed", err)
	}
	if _, _, err := l.Accept(ctx); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close = %v, want net.ErrClosed", err)
	}
}

func TestListenConfigErrors(t *testing.T) {
	cases := []struct {
		cfg  ListenConfig
		want string
	}{
		{ListenConfig{Secret: []byte("short")}, "5 bytes"},
		{ListenConfig{Secret: secretA, HandshakeTimeout: -1}, "HandshakeTimeout = -1ns"},
		{ListenConfig{Secret: secretA, MaxPending: 1 << 17}, "MaxPending = 131072"},
		{ListenConfig{Secret: secretA, MaxPending: 4, MaxPendingPerSource: 5}, "MaxPendingPerSource = 5"},
	}
	for _, c := range cases {
		l, err := Listen("127.0.0.1:0", c.cfg)
		if err == nil {
			l.Close()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Listen(%+v) = %v; want an error naming %q", c.cfg, err, c.want)
		}
	}
}

// TestProofFollowsDoc builds the client's step 2 by hand as the package
// doc describes it, keyed with HKDF-SHA256(secret, salt "mptx/2", info
// "handshake tags") rather than the secret, and checks that a server
// accepts it and answers with the documented server proof.
func TestProofFollowsDoc(t *testing.T) {
	cc, sc := pair(t)
	done := make(chan error, 1)
	go func() {
		s, err := Server(context.Background(), sc, secretA)
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	_ = cc.SetDeadline(time.Now().Add(10 * time.Second))
	hello := make([]byte, 4+2+32)
	if _, err := io.ReadFull(cc, hello); err != nil {
		t.Fatal(err)
	}
	if string(hello[:4]) != "MPTX" || hello[4] != 0 || hello[5] != 3 {
		t.Fatalf("hello %x, want MPTX version 3", hello[:6])
	}
	nonceS, nonceC := hello[6:], bytes.Repeat([]byte{0x42}, 32)
	k, err := hkdf.Key(sha256.New, secretA, []byte("mptx/2"), "handshake tags", 32)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(label string, a, b []byte) []byte {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(label))
		m.Write(a)
		m.Write(b)
		return m.Sum(nil)
	}
	if _, err := cc.Write(append(append([]byte(nil), nonceC...), sign("mptx/2 client", nonceS, nonceC)...)); err != nil {
		t.Fatal(err)
	}
	verdict := make([]byte, 1+32)
	if _, err := io.ReadFull(cc, verdict); err != nil {
		t.Fatalf("reading the verdict: %v (the server rejected the documented proof?)", err)
	}
	if verdict[0] != 0xA5 || !hmac.Equal(verdict[1:], sign("mptx/2 server", nonceC, nonceS)) {
		t.Fatalf("verdict %x; want the accept byte and HMAC(k, \"mptx/2 server\" ‖ nonceC ‖ nonceS)", verdict)
	}
	if err := <-done; err != nil {
		t.Fatalf("Server: %v", err)
	}
}
