package bootstrap

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"reflect"
	"runtime"
	"testing"
	"time"
)

// Fuzz targets for everything a peer can make this package parse: the
// handshake's hello and verdict, frames, and every message decoder. Their
// seed corpora are in testdata/fuzz; `make fuzz` runs them.

// scriptConn is a net.Conn whose reads come from producers that see what
// was written so far (so a harness can sign a reply over the nonce the
// code under test just sent) and whose writes are recorded.
type scriptConn struct {
	steps   []func(written []byte) []byte
	cur     []byte
	written bytes.Buffer
}

func (c *scriptConn) Read(b []byte) (int, error) {
	for len(c.cur) == 0 {
		if len(c.steps) == 0 {
			return 0, io.EOF
		}
		c.cur, c.steps = c.steps[0](c.written.Bytes()), c.steps[1:]
	}
	n := copy(b, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}

func (c *scriptConn) Write(b []byte) (int, error)      { return c.written.Write(b) }
func (c *scriptConn) Close() error                     { return nil }
func (c *scriptConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *scriptConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

func fixed(b []byte) func([]byte) []byte { return func([]byte) []byte { return b } }

// allocBound fails t if f allocates more than limit bytes: a length field
// must never size an allocation beyond the protocol's bounds.
func allocBound(t *testing.T, limit uint64, f func()) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > limit {
		t.Fatalf("allocated %d bytes, want at most %d", d, limit)
	}
}

// FuzzClientHandshake feeds a client arbitrary server hellos and verdicts.
// With sign set, the harness replaces the verdict's proof by the valid one
// over the nonces the client used, so that what follows the proof check is
// reached too. A client must accept exactly the valid MPTX version 2
// hello with an accept byte and a valid proof.
func FuzzClientHandshake(f *testing.F) {
	hello := append([]byte(magic), 0, Version)
	hello = append(hello, bytes.Repeat([]byte{7}, nonceLen)...)
	f.Add(hello, append([]byte{statusAccept}, make([]byte, tagLen)...), true)
	f.Add(hello, append([]byte{statusAccept}, make([]byte, tagLen)...), false)
	f.Add(hello, []byte{statusReject}, false)
	f.Add([]byte("MPTX\x00\x01"+string(make([]byte, nonceLen))), []byte{statusAccept}, true)
	f.Add([]byte("HTTP/1.1 400 Bad Request\r\n"), []byte{}, false)
	f.Fuzz(func(t *testing.T, hello, verdict []byte, sign bool) {
		key, err := handshakeKey(secretA)
		if err != nil {
			t.Fatal(err)
		}
		const helloLen = len(magic) + 2 + nonceLen
		c := &scriptConn{steps: []func([]byte) []byte{fixed(hello)}}
		if len(hello) >= helloLen {
			// Exactly the hello, then the verdict; a short hello ends
			// in EOF.
			c.steps = []func([]byte) []byte{fixed(hello[:helloLen]), func(w []byte) []byte {
				if !sign || len(w) < nonceLen || len(verdict) < 1 {
					return verdict
				}
				nonceS, nonceC := hello[len(magic)+2:helloLen], w[:nonceLen]
				return append([]byte{verdict[0]}, mac(key, labelServer, nonceC, nonceS)...)
			}}
		}
		var s *Session
		allocBound(t, 1<<20, func() { s, err = clientHandshake(context.Background(), c, secretA) })
		valid := len(hello) >= len(magic)+2+nonceLen && string(hello[:len(magic)]) == magic &&
			binary.BigEndian.Uint16(hello[len(magic):]) == Version && len(verdict) >= 1 && verdict[0] == statusAccept && sign
		if (err == nil) != valid {
			t.Fatalf("clientHandshake(hello %x, verdict %x, sign %v) = %v; want success %v", hello, verdict, sign, err, valid)
		}
		if err == nil && s == nil {
			t.Fatal("clientHandshake returned neither a Session nor an error")
		}
	})
}

// FuzzServerHandshake feeds a server arbitrary client responses; with sign
// set, the harness signs the response's nonce correctly. The server must
// accept exactly a full-length, correctly signed response, and answer
// anything else with the reject byte or nothing.
func FuzzServerHandshake(f *testing.F) {
	f.Add(bytes.Repeat([]byte{3}, nonceLen+tagLen), true)
	f.Add(bytes.Repeat([]byte{3}, nonceLen+tagLen), false)
	f.Add([]byte{1, 2, 3}, true)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, resp []byte, sign bool) {
		key, err := handshakeKey(secretA)
		if err != nil {
			t.Fatal(err)
		}
		c := &scriptConn{steps: []func([]byte) []byte{func(w []byte) []byte {
			if !sign || len(resp) < nonceLen || len(w) < len(magic)+2+nonceLen {
				return resp
			}
			nonceS, nonceC := w[len(magic)+2:len(magic)+2+nonceLen], resp[:nonceLen]
			return append(append([]byte(nil), nonceC...), mac(key, labelClient, nonceS, nonceC)...)
		}}}
		_, err = serverHandshake(context.Background(), c, secretA)
		valid := sign && len(resp) >= nonceLen
		if (err == nil) != valid {
			t.Fatalf("serverHandshake(resp %x, sign %v) = %v; want success %v", resp, sign, err, valid)
		}
		out := c.written.Bytes()[len(magic)+2+nonceLen:]
		if errors.Is(err, ErrAuth) && !bytes.Equal(out, []byte{statusReject}) {
			t.Fatalf("after a bad proof the server wrote %x, want only the reject byte", out)
		}
	})
}

// session returns a Session reading from c with a fixed session key, and
// the peer's Session writing into w with the same key.
func sessions(c net.Conn, w net.Conn) (recv, send *Session) {
	key := [tagLen]byte{1, 2, 3}
	recv = &Session{conn: c, r: bufio.NewReader(c), key: key, server: true}
	send = &Session{conn: w, key: key}
	return recv, send
}

// FuzzReadFrame feeds a Session arbitrary bytes as its peer's frames: no
// panic, no allocation beyond one frame of MaxPayload, and no frame
// accepted without its tag.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, byte(TypeReady)})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Add(append([]byte{0, 1, 0, 0, 1}, make([]byte, 64<<10+tagLen)...))
	f.Add(append([]byte{0, 0, 0, 3, 5, 0, 1, 'x'}, make([]byte, tagLen)...))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, _ := sessions(&scriptConn{steps: []func([]byte) []byte{fixed(raw)}}, nil)
		for i := 0; i < 4; i++ {
			var err error
			allocBound(t, 2*MaxPayload+(1<<16), func() { _, _, err = s.Recv(context.Background()) })
			if err == nil {
				t.Fatalf("frame %d of %x was accepted without a valid tag", i, raw)
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, os.ErrDeadlineExceeded) {
				return
			}
		}
	})
}

// FuzzSessionRecv sends a validly tagged frame of any type and payload
// through Recv, reaching every decoder. What decodes must encode back to
// exactly the payload: each message has one encoding.
func FuzzSessionRecv(f *testing.F) {
	for _, m := range seedMessages() {
		var e enc
		m.m.marshal(&e)
		f.Add(byte(m.t), e.b)
	}
	f.Add(byte(TypeReady), []byte{})
	f.Add(byte(TypeAbort), []byte{0, 3, 'b', 'y', 'e'})
	f.Add(byte(0), []byte{})
	f.Add(byte(200), []byte{1})
	f.Fuzz(func(t *testing.T, typ byte, payload []byte) {
		if len(payload) > MaxPayload {
			return
		}
		var frames bytes.Buffer
		_, send := sessions(nil, &scriptConn{})
		send.conn = writerConn{&frames}
		if err := send.writeFrame(context.Background(), Type(typ), payload); err != nil {
			t.Fatal(err)
		}
		recv, _ := sessions(&scriptConn{steps: []func([]byte) []byte{fixed(frames.Bytes())}}, nil)
		got, m, err := recv.Recv(context.Background())
		if got != Type(typ) && err == nil {
			t.Fatalf("Recv = type %v, want %v", got, Type(typ))
		}
		if err != nil {
			if !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrAborted) {
				t.Fatalf("Recv(type %d, %x) = %v; want a protocol error or an abort", typ, payload, err)
			}
			return
		}
		var e enc
		switch v := m.(type) {
		case nil:
		case message:
			v.marshal(&e)
		default:
			t.Fatalf("Recv returned a %T", m)
		}
		if !bytes.Equal(e.b, payload) {
			t.Fatalf("type %v: payload %x decodes to %+v, which encodes to %x", Type(typ), payload, m, e.b)
		}
	})
}

// writerConn is a net.Conn that only writes, into a buffer.
type writerConn struct{ w *bytes.Buffer }

func (c writerConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (c writerConn) Write(b []byte) (int, error)      { return c.w.Write(b) }
func (c writerConn) Close() error                     { return nil }
func (c writerConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c writerConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c writerConn) SetDeadline(time.Time) error      { return nil }
func (c writerConn) SetReadDeadline(time.Time) error  { return nil }
func (c writerConn) SetWriteDeadline(time.Time) error { return nil }

type typed struct {
	t Type
	m message
}

func seedMessages() []typed {
	ep := Endpoint{QPN: 0x11, PSN: 0x123456, GID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 15: 1}, MTU: 4096, FlowLabel: 0xabcde, Rkey: 9, NIC: 1, Device: "rxe0"}
	return []typed{
		{TypeOffer, &Offer{Caps: CapCRC, Size: 64 << 20, ChunkSize: 1 << 20, CRC32C: 0xdeadbeef, Name: "tensor.bin", Paths: []Endpoint{ep, ep}}},
		{TypeAccept, &Accept{Caps: CapMemoryWindow, RegionAddr: 0x7f0000000000, RegionLen: 64 << 20, Paths: []Endpoint{ep}}},
		{TypeTransfer, &Transfer{ID: 7, Slot: 3, Size: 64 << 20, ChunkSize: 4 << 20, Count: 16, Remote: 4096, CRC: true, CRC32C: 1}},
		{TypeTransferAck, &Transfer{ID: 7}},
		{TypeReceipt, &Receipt{ID: 7, OK: true, Bytes: 1 << 20, CRC32C: 2, Message: "ok"}},
		{TypeResetPath, &ResetPath{Path: 3, QPN: 0x17, PSN: 0xabcdef, Seq: 9}},
		{TypeResetAck, &ResetAck{Path: 3, Seq: 9, OK: true, PSN: 1, Rkey: 2, Message: "reset"}},
	}
}

// fuzzDecode is the body of the per-message decoder targets: whatever
// decodes must encode back to exactly the input (one encoding per
// message) and decode again to the same value.
func fuzzDecode[T any, P interface {
	*T
	message
}](f *testing.F, t Type) {
	for _, m := range seedMessages() {
		if m.t == t {
			var e enc
			m.m.marshal(&e)
			f.Add(e.b)
			f.Add(e.b[:len(e.b)/2])
		}
	}
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 64))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m T
		d := &dec{b: b}
		allocBound(t, 4*uint64(len(b))+(1<<16), func() { P(&m).unmarshal(d) })
		if d.done() != nil {
			return
		}
		var e enc
		P(&m).marshal(&e)
		if !bytes.Equal(e.b, b) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b, m, e.b)
		}
		var m2 T
		d2 := &dec{b: e.b}
		P(&m2).unmarshal(d2)
		if err := d2.done(); err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip: %v, %+v != %+v", err, m, m2)
		}
	})
}

func FuzzDecodeOffer(f *testing.F)     { fuzzDecode[Offer](f, TypeOffer) }
func FuzzDecodeAccept(f *testing.F)    { fuzzDecode[Accept](f, TypeAccept) }
func FuzzDecodeTransfer(f *testing.F)  { fuzzDecode[Transfer](f, TypeTransfer) }
func FuzzDecodeReceipt(f *testing.F)   { fuzzDecode[Receipt](f, TypeReceipt) }
func FuzzDecodeResetPath(f *testing.F) { fuzzDecode[ResetPath](f, TypeResetPath) }
func FuzzDecodeResetAck(f *testing.F)  { fuzzDecode[ResetAck](f, TypeResetAck) }
