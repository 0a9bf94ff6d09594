package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	secretA = []byte("0123456789abcdef-secret-A")
	secretB = []byte("0123456789abcdef-secret-B")
)

// tapConn lets a test corrupt or replay what one side writes.
type tapConn struct {
	net.Conn
	mu      sync.Mutex
	flip    bool   // flip a bit of the next write
	last    []byte // copy of the last write
	records bool
}

func (c *tapConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	if c.records {
		c.last = append(c.last[:0], b...)
	}
	if c.flip {
		c.flip = false
		b = append([]byte(nil), b...)
		b[len(b)/2] ^= 0x10
	}
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// pair returns a connected TCP pair over loopback.
func pair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			ch <- nil
			return
		}
		ch <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-ch
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

type result struct {
	s   *Session
	err error
}

// handshake runs Client and Server concurrently with their secrets.
func handshake(t *testing.T, cs, ss []byte, cc, sc net.Conn) (client, server result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan result, 1)
	go func() {
		s, err := Server(ctx, sc, ss)
		done <- result{s, err}
	}()
	s, err := Client(ctx, cc, cs)
	return result{s, err}, <-done
}

func TestHandshakeAndExchange(t *testing.T) {
	cc, sc := pair(t)
	c, s := handshake(t, secretA, secretA, cc, sc)
	if c.err != nil || s.err != nil {
		t.Fatalf("handshake: client %v, server %v", c.err, s.err)
	}
	ctx := context.Background()
	offer := &Offer{
		Caps: CapCRC, Size: 64 << 20, ChunkSize: 1 << 20, CRC32C: 0xdeadbeef, Name: "tensor.bin",
		Paths: []Endpoint{
			{QPN: 0x11, PSN: 0x123456, GID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 77, 15: 1}, MTU: 4096, FlowLabel: 0xabcde, NIC: 0, Device: "rxe0"},
			{QPN: 0x12, PSN: 0x654321, MTU: 1024, NIC: 1, Device: "rxe2"},
		},
	}
	accept := &Accept{Caps: CapMemoryWindow, RegionAddr: 0x7f0000000000, RegionLen: 64 << 20,
		Paths: []Endpoint{{QPN: 0x21, Rkey: 0x1234, MTU: 4096}, {QPN: 0x22, Rkey: 0x5678, MTU: 1024}}}
	receipt := &Receipt{ID: 7, OK: true, Bytes: 64 << 20, CRC32C: 0xdeadbeef, Message: "ok"}
	transfer := &Transfer{ID: 7, Slot: 3, Size: 64 << 20, ChunkSize: 4 << 20, Count: 16, Remote: 4096, CRC: true, CRC32C: 0xdeadbeef}

	errc := make(chan error, 1)
	var gotOffer *Offer
	go func() {
		var err error
		if gotOffer, err = s.s.RecvOffer(ctx); err != nil {
			errc <- err
			return
		}
		if err = s.s.SendAccept(ctx, accept); err != nil {
			errc <- err
			return
		}
		if err = s.s.RecvReady(ctx); err != nil {
			errc <- err
			return
		}
		tr, err := s.s.RecvTransfer(ctx)
		if err != nil {
			errc <- err
			return
		}
		if !reflect.DeepEqual(tr, transfer) {
			errc <- fmt.Errorf("RecvTransfer = %+v, want %+v", tr, transfer)
			return
		}
		if err = s.s.SendTransferAck(ctx, tr); err != nil {
			errc <- err
			return
		}
		errc <- s.s.SendReceipt(ctx, receipt)
	}()
	if err := c.s.SendOffer(ctx, offer); err != nil {
		t.Fatal(err)
	}
	gotAccept, err := c.s.RecvAccept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.s.SendReady(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.s.SendTransfer(ctx, transfer); err != nil {
		t.Fatal(err)
	}
	if ack, err := c.s.RecvTransferAck(ctx); err != nil || ack.ID != transfer.ID {
		t.Fatalf("RecvTransferAck = %+v, %v; want transfer %d", ack, err, transfer.ID)
	}
	gotReceipt, err := c.s.RecvReceipt(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotOffer, offer) {
		t.Errorf("RecvOffer = %+v, want %+v", gotOffer, offer)
	}
	if !reflect.DeepEqual(gotAccept, accept) {
		t.Errorf("RecvAccept = %+v, want %+v", gotAccept, accept)
	}
	if !reflect.DeepEqual(gotReceipt, receipt) {
		t.Errorf("RecvReceipt = %+v, want %+v", gotReceipt, receipt)
	}
}

func TestWrongSecretRejected(t *testing.T) {
	cc, sc := pair(t)
	c, s := handshake(t, secretB, secretA, cc, sc)
	if !errors.Is(c.err, ErrAuth) {
		t.Errorf("client error = %v, want ErrAuth", c.err)
	}
	if !errors.Is(s.err, ErrAuth) {
		t.Errorf("server error = %v, want ErrAuth", s.err)
	}
	if c.s != nil || s.s != nil {
		t.Errorf("sessions = %v, %v; want none", c.s, s.s)
	}
	// The server closed the connection: the client's end reads EOF and
	// nothing else (it learned only the verdict byte, already consumed).
	_ = cc.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := cc.Read(make([]byte, 1)); err == nil {
		t.Errorf("client read %d more bytes after rejection", n)
	}
}

func TestImpostorServerDetected(t *testing.T) {
	// The server accepts anything (it knows a different secret and skips
	// the check): the client must still refuse it, since its proof fails.
	cc, sc := pair(t)
	go func() {
		hello := append([]byte(magic), 0, Version)
		hello = append(hello, make([]byte, nonceLen)...)
		_, _ = sc.Write(hello)
		_, _ = io.ReadFull(sc, make([]byte, nonceLen+tagLen))
		_, _ = sc.Write(append([]byte{statusAccept}, make([]byte, tagLen)...))
	}()
	_, err := Client(context.Background(), cc, secretA)
	if !errors.Is(err, ErrAuth) {
		t.Fatalf("Client(impostor) = %v, want ErrAuth", err)
	}
}

func TestNotMPTXServer(t *testing.T) {
	cc, sc := pair(t)
	go func() { _, _ = sc.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n---------------")) }()
	_, err := Client(context.Background(), cc, secretA)
	if !errors.Is(err, ErrProtocol) {
		t.Fatalf("Client(http server) = %v, want ErrProtocol", err)
	}
}

func TestShortSecret(t *testing.T) {
	cc, _ := pair(t)
	_, err := Client(context.Background(), cc, []byte("short"))
	if err == nil || !strings.Contains(err.Error(), "5 bytes") || !strings.Contains(err.Error(), "16") {
		t.Fatalf("Client(short secret) = %v, want an error naming 5 bytes and the minimum 16", err)
	}
}

func TestSilentClientTimesOut(t *testing.T) {
	_, sc := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := Server(ctx, sc, secretA)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Server(silent client) = %v, want context.DeadlineExceeded", err)
	}
}

func TestTamperedFrame(t *testing.T) {
	cc, sc := pair(t)
	tap := &tapConn{Conn: cc}
	c, s := handshake(t, secretA, secretA, tap, sc)
	if c.err != nil || s.err != nil {
		t.Fatal(c.err, s.err)
	}
	ctx := context.Background()
	tap.flip = true
	if err := c.s.SendOffer(ctx, &Offer{Size: 1, Paths: []Endpoint{{QPN: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.s.RecvOffer(ctx); !errors.Is(err, ErrIntegrity) {
		t.Fatalf("RecvOffer(tampered) = %v, want ErrIntegrity", err)
	}
}

func TestReplayedFrame(t *testing.T) {
	cc, sc := pair(t)
	tap := &tapConn{Conn: cc}
	c, s := handshake(t, secretA, secretA, tap, sc)
	if c.err != nil || s.err != nil {
		t.Fatal(c.err, s.err)
	}
	ctx := context.Background()
	tap.records = true
	if err := c.s.SendOffer(ctx, &Offer{Size: 1, Paths: []Endpoint{{QPN: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.s.RecvOffer(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.Write(tap.last); err != nil { // the same bytes again
		t.Fatal(err)
	}
	if _, err := s.s.RecvOffer(ctx); !errors.Is(err, ErrIntegrity) {
		t.Fatalf("RecvOffer(replayed) = %v, want ErrIntegrity", err)
	}
}

func TestReflectedFrame(t *testing.T) {
	// A frame the server sent, fed back to the server, must not verify.
	cc, sc := pair(t)
	tap := &tapConn{Conn: sc, records: true}
	c, s := handshake(t, secretA, secretA, cc, tap)
	if c.err != nil || s.err != nil {
		t.Fatal(c.err, s.err)
	}
	ctx := context.Background()
	if err := s.s.SendReceipt(ctx, &Receipt{OK: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.Write(tap.last); err != nil {
		t.Fatal(err)
	}
	if _, err := s.s.RecvOffer(ctx); !errors.Is(err, ErrIntegrity) {
		t.Fatalf("server reading its own frame = %v, want ErrIntegrity", err)
	}
}

func TestAbort(t *testing.T) {
	cc, sc := pair(t)
	c, s := handshake(t, secretA, secretA, cc, sc)
	if c.err != nil || s.err != nil {
		t.Fatal(c.err, s.err)
	}
	ctx := context.Background()
	s.s.SendAbort(ctx, "region of 1 TiB does not fit the pool")
	_, err := c.s.RecvAccept(ctx)
	if !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("RecvAccept after Abort = %v, want ErrAborted with the reason", err)
	}
}

func TestOfferNeedsPaths(t *testing.T) {
	cc, sc := pair(t)
	c, s := handshake(t, secretA, secretA, cc, sc)
	if c.err != nil || s.err != nil {
		t.Fatal(c.err, s.err)
	}
	if err := c.s.SendOffer(context.Background(), &Offer{Size: 1}); err == nil {
		t.Fatal("SendOffer with no paths succeeded")
	}
}

func TestResetAndRecvAny(t *testing.T) {
	cc, sc := pair(t)
	c, s := handshake(t, secretA, secretA, cc, sc)
	if c.err != nil || s.err != nil {
		t.Fatal(c.err, s.err)
	}
	ctx := context.Background()
	rp := &ResetPath{Path: 3, QPN: 0x17, PSN: 0xabcdef, Seq: 0x01020304}
	ack := &ResetAck{Path: 3, Seq: 0x01020304, OK: true, PSN: 0x123456, Rkey: 0x99, Message: "reset"}
	errc := make(chan error, 1)
	go func() {
		typ, m, err := s.s.Recv(ctx)
		if err != nil || typ != TypeResetPath || !reflect.DeepEqual(m, rp) {
			errc <- fmt.Errorf("Recv = %v, %+v, %v; want the ResetPath", typ, m, err)
			return
		}
		// Two writers at once: the frames must not interleave.
		var wg sync.WaitGroup
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); _ = s.s.SendResetAck(ctx, ack) }()
		}
		wg.Wait()
		errc <- nil
	}()
	if err := c.s.SendResetPath(ctx, rp); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		typ, m, err := c.s.Recv(ctx)
		if err != nil || typ != TypeResetAck || !reflect.DeepEqual(m, ack) {
			t.Fatalf("ack %d: Recv = %v, %+v, %v", i, typ, m, err)
		}
	}
}
