package tcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

// Fuzz targets for everything a peer can make this package parse: data
// frames (the receiver), ACK and NAK frames (the sender), and the
// handshake's messages on both sides. Their seed corpora are in
// testdata/fuzz; `make fuzz` runs them.

var fuzzSecret = []byte("0123456789abcdef0123456789abcdef")

// allocBound fails t if f allocates more than limit bytes: a length field
// must never size an allocation.
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

// loopback returns a connected TCP pair over loopback from ln.
func loopback(t *testing.T, ln *net.TCPListener) (client, server *net.TCPConn) {
	t.Helper()
	ch := make(chan *net.TCPConn, 1)
	go func() {
		c, err := ln.AcceptTCP()
		if err != nil {
			ch <- nil
			return
		}
		ch <- c
	}()
	c, err := net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
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

func listenLoopback(f *testing.F) *net.TCPListener {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { ln.Close() })
	return ln
}

// frame builds a data frame as the package doc lays it out.
func frame(op, flags byte, seq uint32, remote uint64, length uint32, imm uint32, payload []byte) []byte {
	b := []byte{op, flags, 0, 0}
	b = binary.BigEndian.AppendUint32(b, seq)
	b = binary.BigEndian.AppendUint64(b, remote)
	b = binary.BigEndian.AppendUint32(b, length)
	b = binary.BigEndian.AppendUint32(b, imm)
	return append(b, payload...)
}

// streamModel is what a receiver with region size bytes must do with a
// frame stream, by the package doc: apply frames in sequence until one
// breaks the protocol or the stream ends (a truncated payload lands as far
// as it goes), NAK the first one outside the region (or, keyed, outside
// its exposure or its right) and apply nothing after it; answer each READ
// with the exposure's bytes.
type streamModel struct {
	region  []byte
	exps    []modelExposure
	imms    []uint32 // immediates of the applied WRITE WITH IMMs, in order
	applied uint32   // the last frame applied
	nak     uint32   // the NAKed frame, 0 for none
	resps   []modelResp
}

// modelExposure is an exposure of the model: its key, address, rights
// and bytes.
type modelExposure struct {
	key    uint32
	addr   uint64
	access qp.Access
	mem    []byte
}

// modelResp is a READ response the receiver must send.
type modelResp struct {
	seq  uint32
	data []byte
}

func model(stream []byte, size int, exps ...modelExposure) streamModel {
	m := streamModel{region: make([]byte, size)}
	for _, e := range exps {
		e.mem = append([]byte(nil), e.mem...)
		m.exps = append(m.exps, e)
	}
	expect := uint32(1)
	for len(stream) >= hdrLen {
		h := parseHeader(stream)
		hl := hdrLen
		if keyed(h.op) {
			hl = hdrMax
		}
		if len(stream) < hl {
			return m // the stream ended inside a keyed header
		}
		if keyed(h.op) {
			h.key = binary.BigEndian.Uint32(stream[hdrLen:])
		}
		stream = stream[hl:]
		if !validOp(h.op) || h.flags != 0 || h.seq != expect || units.Bytes(h.length) > MaxMessageBytes || (h.op == opRead && h.length == 0) {
			return m
		}
		expect++
		pay := int(h.payload())
		n := min(pay, len(stream))
		payload := stream[:n]
		stream = stream[n:]
		var dst []byte // where the frame's bytes go (or come from, for a READ)
		refused := true
		switch {
		case keyed(h.op):
			need := qp.AccessWrite
			if h.op == opRead {
				need = qp.AccessRead
			}
			for _, e := range m.exps {
				if e.key == h.key && e.access&need != 0 && h.remote >= e.addr && h.remote-e.addr <= uint64(len(e.mem)) &&
					uint64(h.length) <= uint64(len(e.mem))-(h.remote-e.addr) {
					dst, refused = e.mem[h.remote-e.addr:h.remote-e.addr+uint64(h.length)], false
				}
			}
		case h.remote <= uint64(size) && uint64(h.length) <= uint64(size)-h.remote:
			dst, refused = m.region[h.remote:h.remote+uint64(h.length)], false
		}
		if m.nak != 0 || refused {
			// Discarded (after a NAK, or NAKed now once the payload is
			// read); a truncated payload ends the stream first.
			if n < pay {
				return m
			}
			if m.nak == 0 {
				m.nak = h.seq
			}
			continue
		}
		if h.op == opRead {
			m.resps = append(m.resps, modelResp{seq: h.seq, data: append([]byte(nil), dst...)})
			m.applied = h.seq
			continue
		}
		if keyed(h.op) && n < pay {
			// A keyed write lands a whole piece at a time: a truncated
			// one lands what it read of its (only) piece, none of it.
			return m
		}
		copy(dst, payload)
		if n < pay {
			return m // truncated: the stream ended inside the payload
		}
		if h.op == opWriteImm || h.op == opWriteImmKey {
			m.imms = append(m.imms, h.imm)
		}
		m.applied = h.seq
	}
	return m
}

// keyedFrame builds a keyed data frame.
func keyedFrame(op byte, seq uint32, remote uint64, length, imm, key uint32, payload []byte) []byte {
	b := frame(op, 0, seq, remote, length, imm, nil)
	b = binary.BigEndian.AppendUint32(b, key)
	return append(b, payload...)
}

// FuzzReceiverStream writes arbitrary bytes as a path's frame stream into
// a Receiver's reader and checks it against the package doc's rules
// (model): the region holds exactly what the applied frames wrote and
// nothing lands outside it (guard bands), receive completions are those
// of the applied WRITE WITH IMMs in order, and the acknowledgements are
// well formed: ACKs in increasing order up to the last frame applied, one
// NAK for the first frame outside the region. A length field never sizes
// an allocation.
func FuzzReceiverStream(f *testing.F) {
	f.Add(frame(opWriteImm, 0, 1, 0, 4, 7, []byte("abcd")))
	f.Add(append(frame(opWrite, 0, 1, 8, 3, 0, []byte("xyz")), frame(opWriteImm, 0, 2, 0, 0, 9, nil)...))
	f.Add(append(frame(opWriteImm, 0, 1, 250, 8, 1, []byte("12345678")), frame(opWriteImm, 0, 2, 0, 1, 2, []byte("z"))...))
	f.Add(frame(opWrite, 0, 2, 0, 1, 0, []byte("q")))                   // wrong sequence number
	f.Add(frame(opWrite, 1, 1, 0, 1, 0, []byte("q")))                   // flags
	f.Add(frame(opWriteImm, 0, 1, 0, 1<<30, 0, []byte("truncated")))    // 1 GiB length, 9 bytes of it
	f.Add(frame(opWriteImm, 0, 1, 0, 1<<31, 0, nil))                    // length past MaxMessageBytes
	f.Add(frame(opWrite, 0, 1, 1<<63, 16, 0, make([]byte, 16)))         // remote past the region
	f.Add(append(frame(opWrite, 0, 1, 0, 2, 0, []byte("ab")), 1, 0, 0)) // trailing partial header
	ln := listenLoopback(f)
	f.Fuzz(func(t *testing.T, stream []byte) {
		const size, guard = 256, 64
		want := model(stream, size)
		if len(want.imms) > 1000 {
			return // more than the receive queue below holds without polling
		}
		client, server := loopback(t, ln)
		backing := bytes.Repeat([]byte{0xEE}, size+2*guard)
		region := backing[guard : guard+size : guard+size]
		for i := range region {
			region[i] = 0
		}
		r := &Receiver{region: region, infos: make([]qp.PathInfo, 1), paths: make([]*recvPath, 1),
			notify: make(chan struct{}, 1), done: make(chan struct{}), ln: &Listener{}}
		r.space.L = &r.mu
		r.cq.Init(1024)
		p := newRecvPath(r, 0, server, 0x100)
		r.paths[0] = p
		var acks []byte
		allocBound(t, 8<<20, func() {
			r.wg.Add(1)
			go p.readLoop(server, p.exited)
			go func() {
				_, _ = client.Write(stream)
				_ = client.CloseWrite()
			}()
			_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
			var err error
			acks, err = io.ReadAll(client)
			if err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
				t.Fatalf("reading the receiver's acknowledgements: %v", err)
			}
			<-p.exited
		})
		dst := make([]qp.Completion, 1024)
		n, err := r.Poll(dst)
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		for i, b := range backing {
			if (i < guard || i >= guard+size) && b != 0xEE {
				t.Fatalf("byte %d outside the region changed to %#x", i-guard, b)
			}
		}
		if !bytes.Equal(region, want.region) {
			t.Fatalf("region %x, want %x", region, want.region)
		}
		if n != len(want.imms) {
			t.Fatalf("%d receive completions, want %d", n, len(want.imms))
		}
		for i, c := range dst[:n] {
			if c.Imm != want.imms[i] || c.Op != qp.OpRecvImm || c.Status != qp.StatusOK || c.Path != 0 {
				t.Fatalf("completion %d = %+v, want imm %d", i, c, want.imms[i])
			}
		}
		if len(acks)%ackLen != 0 {
			t.Fatalf("%d bytes of acknowledgements, not whole %d-byte frames: %x", len(acks), ackLen, acks)
		}
		last, naks := uint32(0), 0
		for k := 0; k < len(acks); k += ackLen {
			a := acks[k : k+ackLen]
			seq := binary.BigEndian.Uint32(a[4:])
			switch {
			case a[0] == typeACK && a[1] == 0 && a[2]|a[3] == 0 && naks == 0:
				if seq <= last || seq > want.applied {
					t.Fatalf("ACK of %d after %d; want increasing, at most the last frame applied (%d)", seq, last, want.applied)
				}
				last = seq
			case a[0] == typeNAK && a[1] == synRemoteAccess && a[2]|a[3] == 0 && naks == 0:
				if seq != want.nak {
					t.Fatalf("NAK of %d, want %d", seq, want.nak)
				}
				naks++
			default:
				t.Fatalf("acknowledgement frame %x is malformed or follows a NAK", a)
			}
		}
		if (want.nak != 0) != (naks == 1) {
			t.Fatalf("%d NAKs, want one for frame %d", naks, want.nak)
		}
	})
}

func isReset(err error) bool {
	return err != nil && (bytes.Contains([]byte(err.Error()), []byte("reset")) || bytes.Contains([]byte(err.Error()), []byte("broken pipe")))
}

// ackModel computes the send completions of n writes, all sent, when the
// receiver answers with the acknowledgement stream acks and then closes,
// by the package doc's rules.
func ackModel(acks []byte, n int) []qp.Status {
	out := make([]qp.Status, 0, n)
	fail := func(first qp.Status) []qp.Status {
		for len(out) < n {
			out = append(out, first)
			first = qp.StatusFlushed
		}
		return out
	}
	for len(acks) >= ackLen && len(out) < n {
		a := acks[:ackLen]
		acks = acks[ackLen:]
		seq := binary.BigEndian.Uint32(a[4:])
		head := uint32(len(out) + 1)
		switch {
		case a[0] == typeACK && a[1] == 0 && a[2]|a[3] == 0 && seq >= head && seq <= uint32(n):
			for uint32(len(out)) < seq {
				out = append(out, qp.StatusOK)
			}
		case a[0] == typeNAK && a[1] == synRemoteAccess && a[2]|a[3] == 0 && seq >= head && seq <= uint32(n):
			for uint32(len(out)) < seq-1 {
				out = append(out, qp.StatusOK)
			}
			return fail(qp.StatusRemoteAccess)
		case a[0] == typeReadResp && a[1] == 0 && a[2]|a[3] == 0 && len(acks) < respLen-ackLen:
			// A READ response header cut short: the connection ended
			// inside a frame.
			return fail(qp.StatusRetryExceeded)
		default: // (a READ response answers no WRITE: a protocol violation)
			return fail(qp.StatusFatal)
		}
	}
	return fail(qp.StatusRetryExceeded)
}

// FuzzSenderAcks dials a fake receiver that completes the handshake, reads
// the sender's eight WRITE WITH IMMs, answers with arbitrary bytes as ACK
// and NAK frames and closes. Every write completes exactly once, in post
// order, with the status the package doc gives (ackModel).
func FuzzSenderAcks(f *testing.F) {
	ack := func(typ, syn byte, seq uint32) []byte {
		var b [ackLen]byte
		putAck(&b, typ, syn, seq)
		return b[:]
	}
	f.Add(ack(typeACK, 0, 8))
	f.Add(append(ack(typeACK, 0, 3), ack(typeACK, 0, 8)...))
	f.Add(append(ack(typeACK, 0, 2), ack(typeNAK, synRemoteAccess, 5)...))
	f.Add(ack(typeACK, 0, 9))                  // beyond what was sent
	f.Add(ack(typeACK, 0, 0))                  // before the first
	f.Add(ack(typeNAK, 1, 1))                  // unknown syndrome
	f.Add(append(ack(typeACK, 0, 4), 0x81, 0)) // truncated frame
	f.Add([]byte{})
	key, err := deriveKey(fuzzSecret)
	if err != nil {
		f.Fatal(err)
	}
	ln := listenLoopback(f)
	const n, wrLen = 8, 16
	f.Fuzz(func(t *testing.T, acks []byte) {
		want := ackModel(acks, n)
		served := make(chan error, 1)
		go func() {
			served <- func() error {
				nc, err := ln.AcceptTCP()
				if err != nil {
					return err
				}
				defer nc.Close()
				_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
				var b binding
				if err := serverHello(nc, key, &b); err != nil {
					return err
				}
				if err := serverAccept(nc, key, &b, 4096, 0x100); err != nil {
					return err
				}
				if _, err := io.ReadFull(nc, make([]byte, n*(hdrLen+wrLen))); err != nil {
					return err
				}
				_, err = nc.Write(acks)
				return err
			}()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := Dial(ctx, ln.Addr().String(), DialConfig{Secret: fuzzSecret, Paths: make([]PathConfig, 1), SendRegion: make([]byte, 4096), MaxSendWR: 16})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wrs := make([]qp.SendWR, n)
		for i := range wrs {
			wrs[i] = qp.SendWR{ID: uint64(i + 1), Op: qp.OpWriteImm, Local: units.Bytes(i * wrLen), Remote: units.Bytes(i * wrLen), Len: wrLen, Imm: uint32(i)}
		}
		if k, err := c.PostSend(0, wrs); k != n || err != nil {
			t.Fatalf("PostSend = %d, %v", k, err)
		}
		var got []qp.Completion
		dst := make([]qp.Completion, 16)
		for len(got) < n {
			k, err := c.Poll(dst)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, dst[:k]...)
			if k == 0 {
				select {
				case <-c.Notify():
				case <-ctx.Done():
					t.Fatalf("%d of %d completions after acks %x", len(got), n, acks)
				}
			}
		}
		if err := <-served; err != nil {
			t.Fatalf("fake receiver: %v", err)
		}
		if k, _ := c.Poll(dst); k != 0 {
			t.Fatalf("%d completions more than the %d writes", k, n)
		}
		for i, cq := range got {
			if cq.ID != uint64(i+1) || cq.Status != want[i] {
				t.Fatalf("acks %x: completion %d = WR %d %v; want WR %d %v (all: %v)", acks, i, cq.ID, cq.Status, i+1, want[i], want)
			}
		}
	})
}

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

// FuzzServerHello feeds the listener's side of steps 1–3 an arbitrary
// proof. With sign set (and rejoin choosing the label), the harness signs
// the proof's fields correctly over the nonce the listener sent, so the
// checks after the tag are reached too. The listener must accept exactly a
// correctly signed proof with a path count of 1..MaxPaths and an index
// below it, and answer a bad tag with the reject byte alone.
func FuzzServerHello(f *testing.F) {
	proof := func(index, count uint16) []byte {
		b := bytes.Repeat([]byte{5}, nonceLen+idLen)
		b = binary.BigEndian.AppendUint16(b, index)
		b = binary.BigEndian.AppendUint16(b, count)
		return append(b, make([]byte, tagLen)...)
	}
	f.Add(proof(0, 2), true, false)
	f.Add(proof(1, 2), true, true)
	f.Add(proof(2, 2), true, false)
	f.Add(proof(0, 0), true, false)
	f.Add(proof(0, 65), true, false)
	f.Add(proof(0, 1), false, false)
	f.Add([]byte{1, 2, 3}, true, false)
	key, err := deriveKey(fuzzSecret)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte, sign, rejoin bool) {
		c := &scriptConn{steps: []func([]byte) []byte{func(w []byte) []byte {
			if !sign || len(in) < proofLen || len(w) < helloLen {
				return in
			}
			var b binding
			copy(b.nonceS[:], w[len(magic)+2:])
			copy(b.nonceC[:], in)
			copy(b.id[:], in[nonceLen:])
			b.index = binary.BigEndian.Uint16(in[nonceLen+idLen:])
			b.count = binary.BigEndian.Uint16(in[nonceLen+idLen+2:])
			b.rejoin = rejoin
			return append(append([]byte(nil), in[:nonceLen+idLen+4]...), b.clientTag(key)...)
		}}}
		var b binding
		err := serverHello(c, key, &b)
		valid := sign && len(in) >= proofLen
		if valid {
			index, count := binary.BigEndian.Uint16(in[nonceLen+idLen:]), binary.BigEndian.Uint16(in[nonceLen+idLen+2:])
			valid = count >= 1 && count <= MaxPaths && index < count
		}
		if (err == nil) != valid {
			t.Fatalf("serverHello(%x, sign %v, rejoin %v) = %v; want success %v", in, sign, rejoin, err, valid)
		}
		if err == nil && b.rejoin != rejoin {
			t.Fatalf("serverHello took a %s proof for a rejoin = %v", map[bool]string{false: "join", true: "rejoin"}[rejoin], b.rejoin)
		}
		if out := c.written.Bytes()[helloLen:]; errors.Is(err, ErrAuth) != bytes.Equal(out, []byte{verdictReject}) {
			t.Fatalf("serverHello = %v and wrote %x after its hello; want the reject byte exactly on ErrAuth", err, out)
		}
	})
}

// FuzzClientHandshake feeds a dialing path arbitrary hellos and verdicts
// (steps 1, 2 and 4). With sign set, the harness signs the verdict's
// region and QPN correctly over the nonces in use, so the checks after the
// tag (a region that fits units.Bytes) are reached too.
func FuzzClientHandshake(f *testing.F) {
	hello := append([]byte(magic), 0, Version)
	hello = append(hello, bytes.Repeat([]byte{9}, nonceLen)...)
	verdict := func(v byte, region uint64) []byte {
		b := []byte{v}
		b = binary.BigEndian.AppendUint64(b, region)
		b = binary.BigEndian.AppendUint32(b, 0x100)
		return append(b, make([]byte, tagLen)...)
	}
	f.Add(hello, verdict(verdictAccept, 4096), true, false)
	f.Add(hello, verdict(verdictAccept, 1<<64-1), true, false)
	f.Add(hello, verdict(verdictAccept, 4096), false, false)
	f.Add(hello, []byte{verdictReject}, false, false)
	f.Add(hello, []byte{verdictRefuse}, false, true)
	f.Add(hello, []byte{verdictRefuse}, false, false)
	f.Add([]byte("MPTT\x00\x01"+string(make([]byte, nonceLen))), verdict(verdictAccept, 1), true, false)
	f.Add([]byte("SSH-2.0-OpenSSH_9.2\r\n"), []byte{}, false, false)
	key, err := deriveKey(fuzzSecret)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, hello, verdict []byte, sign, rejoin bool) {
		b := binding{id: ConnID{1}, index: 0, count: 1, rejoin: rejoin}
		c := &scriptConn{steps: []func([]byte) []byte{func([]byte) []byte { return hello }}}
		if len(hello) >= helloLen {
			// Exactly the hello, then the verdict; a short hello ends
			// in EOF.
			c.steps[0] = func([]byte) []byte { return hello[:helloLen] }
			c.steps = append(c.steps, func([]byte) []byte {
				if !sign || len(verdict) < 13 {
					return verdict
				}
				region, qpn := binary.BigEndian.Uint64(verdict[1:]), binary.BigEndian.Uint32(verdict[9:])
				return append(append([]byte(nil), verdict[:13]...), b.serverTag(key, region, qpn)...)
			})
		}
		ctx := context.Background()
		var region uint64
		err := clientHello(ctx, c, key, &b)
		if err == nil {
			region, _, err = clientVerdict(ctx, c, key, &b)
		}
		valid := len(hello) >= helloLen && string(hello[:len(magic)]) == magic && binary.BigEndian.Uint16(hello[len(magic):]) == Version &&
			len(verdict) >= 13 && verdict[0] == verdictAccept && sign && binary.BigEndian.Uint64(verdict[1:]) <= uint64(units.MaxBytes)
		if (err == nil) != valid {
			t.Fatalf("handshake(hello %x, verdict %x, sign %v) = %v; want success %v", hello, verdict, sign, err, valid)
		}
		if err == nil && region > uint64(units.MaxBytes) {
			t.Fatalf("accepted a %d-byte region", region)
		}
		if len(verdict) > 0 && verdict[0] == verdictRefuse && rejoin && !errors.Is(err, ErrRefused) && len(hello) >= helloLen && string(hello[:4]) == magic && binary.BigEndian.Uint16(hello[4:]) == Version {
			t.Fatalf("a rejoin refused with %#x: %v; want ErrRefused", verdictRefuse, err)
		}
	})
}

// FuzzReceiverKeyed is FuzzReceiverStream for keyed frames (READ
// requests, keyed WRITEs and WRITE WITH IMMs): the receiver has a
// read-write exposure and a read-only one, each between guard bands, and
// must answer every READ in range with exactly the exposure's bytes,
// apply every keyed write in range and with the right, refuse everything
// else with the one NAK, and never touch a byte outside the region and
// the exposures' writable range.
func FuzzReceiverKeyed(f *testing.F) {
	const rw, ro = 0x1111, 0x2222
	const rwAddr, roAddr = 1 << 32, 1<<32 + 1<<20
	f.Add(keyedFrame(opRead, 1, rwAddr, 16, 0, rw, nil))
	f.Add(append(keyedFrame(opWriteKey, 1, rwAddr+8, 4, 0, rw, []byte("abcd")), keyedFrame(opRead, 2, rwAddr, 16, 0, rw, nil)...))
	f.Add(append(keyedFrame(opWriteImmKey, 1, rwAddr, 2, 7, rw, []byte("xy")), keyedFrame(opRead, 2, roAddr, 64, 0, ro, nil)...))
	f.Add(keyedFrame(opWriteKey, 1, roAddr, 4, 0, ro, []byte("nope")))                                              // no write right
	f.Add(keyedFrame(opRead, 1, rwAddr+250, 16, 0, rw, nil))                                                        // past the exposure
	f.Add(keyedFrame(opRead, 1, rwAddr-1, 4, 0, rw, nil))                                                           // before it
	f.Add(keyedFrame(opRead, 1, rwAddr, 4, 0, 0x3333, nil))                                                         // unknown key
	f.Add(keyedFrame(opRead, 1, rwAddr, 0, 0, rw, nil))                                                             // empty READ
	f.Add(append(frame(opWrite, 0, 1, 0, 2, 0, []byte("ab")), keyedFrame(opRead, 2, rwAddr, 1<<30, 0, rw, nil)...)) // 1 GiB READ
	f.Add(frame(opRead, 0, 1, rwAddr, 4, 0, []byte{0x11, 0x11}))                                                    // truncated key
	ln := listenLoopback(f)
	f.Fuzz(func(t *testing.T, stream []byte) {
		const size, esize, guard = 256, 256, 64
		mk := func(seed byte, n int) (backing, mem []byte) {
			backing = bytes.Repeat([]byte{0xEE}, n+2*guard)
			mem = backing[guard : guard+n : guard+n]
			for i := range mem {
				mem[i] = seed + byte(i)
			}
			return backing, mem
		}
		rBack, region := mk(0, size)
		clear(region) // the model's region starts zeroed
		wBack, wMem := mk(0x40, esize)
		oBack, oMem := mk(0x80, 64)
		want := model(stream, size,
			modelExposure{key: rw, addr: rwAddr, access: qp.AccessRead | qp.AccessWrite, mem: wMem},
			modelExposure{key: ro, addr: roAddr, access: qp.AccessRead, mem: oMem})
		if len(want.imms) > 1000 {
			return
		}
		client, server := loopback(t, ln)
		r := &Receiver{region: region, infos: make([]qp.PathInfo, 1), paths: make([]*recvPath, 1),
			notify: make(chan struct{}, 1), done: make(chan struct{}), ln: &Listener{}}
		r.space.L = &r.mu
		r.cq.Init(1024)
		r.exps = map[uint32]*exposure{
			rw: {Exposure: qp.Exposure{Key: rw, Addr: rwAddr, Len: esize, Access: qp.AccessRead | qp.AccessWrite}, mem: wMem},
			ro: {Exposure: qp.Exposure{Key: ro, Addr: roAddr, Len: 64, Access: qp.AccessRead}, mem: oMem},
		}
		p := newRecvPath(r, 0, server, 0x100)
		r.paths[0] = p
		var back []byte
		allocBound(t, 8<<20, func() {
			r.wg.Add(1)
			go p.readLoop(server, p.exited)
			go func() {
				_, _ = client.Write(stream)
				_ = client.CloseWrite()
			}()
			_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
			var err error
			back, err = io.ReadAll(client)
			if err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
				t.Fatalf("reading the receiver's answers: %v", err)
			}
			<-p.exited
		})
		dst := make([]qp.Completion, 1024)
		n, err := r.Poll(dst)
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		for name, b := range map[string][]byte{"region": rBack, "read-write exposure": wBack, "read-only exposure": oBack} {
			for i := range b {
				if (i < guard || i >= len(b)-guard) && b[i] != 0xEE {
					t.Fatalf("%s: guard byte %d changed to %#x", name, i, b[i])
				}
			}
		}
		if !bytes.Equal(region, want.region) || !bytes.Equal(wMem, want.exps[0].mem) || !bytes.Equal(oMem, want.exps[1].mem) {
			t.Fatalf("memory differs from the model: region %x (want %x), rw %x (want %x), ro %x (want %x)", region, want.region, wMem, want.exps[0].mem, oMem, want.exps[1].mem)
		}
		if n != len(want.imms) {
			t.Fatalf("%d receive completions, want %d", n, len(want.imms))
		}
		for i, c := range dst[:n] {
			if c.Imm != want.imms[i] {
				t.Fatalf("completion %d = %+v, want imm %d", i, c, want.imms[i])
			}
		}
		last, naks, resps := uint32(0), 0, 0
		for len(back) > 0 {
			if len(back) < ackLen {
				t.Fatalf("%d trailing bytes of an answer: %x", len(back), back)
			}
			a := back[:ackLen]
			seq := binary.BigEndian.Uint32(a[4:])
			switch {
			case a[0] == typeACK && a[1] == 0 && a[2]|a[3] == 0 && naks == 0:
				if seq <= last || seq > want.applied {
					t.Fatalf("ACK of %d after %d; want increasing, at most the last frame applied (%d)", seq, last, want.applied)
				}
				last, back = seq, back[ackLen:]
			case a[0] == typeReadResp && a[1] == 0 && a[2]|a[3] == 0 && naks == 0 && len(back) >= respLen:
				length := binary.BigEndian.Uint32(back[ackLen:])
				if resps >= len(want.resps) || want.resps[resps].seq != seq || int(length) != len(want.resps[resps].data) || len(back)-respLen < int(length) {
					t.Fatalf("READ response to %d of %d bytes; want response %d of %v", seq, length, resps, len(want.resps))
				}
				if got := back[respLen : respLen+int(length)]; !bytes.Equal(got, want.resps[resps].data) {
					t.Fatalf("READ response to %d carries %x, want %x", seq, got, want.resps[resps].data)
				}
				if seq <= last {
					t.Fatalf("READ response to %d after an ACK of %d", seq, last)
				}
				last, back = seq, back[respLen+int(length):]
				resps++
			case a[0] == typeNAK && a[1] == synRemoteAccess && a[2]|a[3] == 0 && naks == 0:
				if seq != want.nak {
					t.Fatalf("NAK of %d, want %d", seq, want.nak)
				}
				naks++
				back = back[ackLen:]
			default:
				t.Fatalf("answer %x is malformed or follows a NAK", a)
			}
		}
		if resps != len(want.resps) {
			t.Fatalf("%d READ responses, want %d", resps, len(want.resps))
		}
		if (want.nak != 0) != (naks == 1) {
			t.Fatalf("%d NAKs, want one for frame %d", naks, want.nak)
		}
	})
}

// FuzzSenderReadResponses dials a fake receiver that reads the sender's
// four READ requests (16 bytes each, into four 16-byte destinations with
// guard bytes between them) and answers with arbitrary bytes as ACK, NAK
// and READ response frames. Every READ completes exactly once, in post
// order; one that completes successfully holds the bytes of a response
// to it; no byte outside a READ's destination changes, and a length field
// never sizes an allocation.
func FuzzSenderReadResponses(f *testing.F) {
	resp := func(seq uint32, data []byte) []byte {
		var h [respLen]byte
		putResp(&h, seq, uint32(len(data)))
		return append(h[:], data...)
	}
	sixteen := bytes.Repeat([]byte{0xAB}, 16)
	f.Add(resp(1, sixteen))
	f.Add(append(append(resp(1, sixteen), resp(2, sixteen)...), append(resp(3, sixteen), resp(4, sixteen)...)...))
	f.Add(resp(2, sixteen))                                    // implicitly acknowledges READ 1: its bytes never came
	f.Add(resp(1, sixteen[:8]))                                // wrong length
	f.Add(resp(5, sixteen))                                    // beyond what was sent
	f.Add(resp(1, sixteen)[:20])                               // truncated payload
	f.Add(append(resp(1, sixteen), 0x82, 2, 0, 0, 0, 0, 0, 2)) // a NAK of READ 2
	f.Add([]byte{0x83, 0, 0, 0, 0, 0, 0, 1, 0x40, 0, 0, 0})    // 1 GiB response
	key, err := deriveKey(fuzzSecret)
	if err != nil {
		f.Fatal(err)
	}
	ln := listenLoopback(f)
	const n, wrLen, stride = 4, 16, 32
	f.Fuzz(func(t *testing.T, answer []byte) {
		served := make(chan error, 1)
		go func() {
			served <- func() error {
				nc, err := ln.AcceptTCP()
				if err != nil {
					return err
				}
				defer nc.Close()
				_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
				var b binding
				if err := serverHello(nc, key, &b); err != nil {
					return err
				}
				if err := serverAccept(nc, key, &b, 4096, 0x100); err != nil {
					return err
				}
				if _, err := io.ReadFull(nc, make([]byte, n*hdrMax)); err != nil {
					return err
				}
				_, err = nc.Write(answer)
				return err
			}()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		local := bytes.Repeat([]byte{0xEE}, n*stride)
		c, err := Dial(ctx, ln.Addr().String(), DialConfig{Secret: fuzzSecret, Paths: make([]PathConfig, 1), SendRegion: local, MaxSendWR: 16})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wrs := make([]qp.SendWR, n)
		for i := range wrs {
			wrs[i] = qp.SendWR{ID: uint64(i + 1), Op: qp.OpRead, Local: units.Bytes(i * stride), Remote: 1<<32 + units.Bytes(i*wrLen), Len: wrLen, RKey: 7}
		}
		var got []qp.Completion
		allocBound(t, 4<<20, func() {
			if k, err := c.PostSend(0, wrs); k != n || err != nil {
				t.Fatalf("PostSend = %d, %v", k, err)
			}
			dst := make([]qp.Completion, 16)
			for len(got) < n {
				k, err := c.Poll(dst)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, dst[:k]...)
				if k == 0 {
					select {
					case <-c.Notify():
					case <-ctx.Done():
						t.Fatalf("%d of %d completions after %x", len(got), n, answer)
					}
				}
			}
		})
		if err := <-served; err != nil {
			t.Fatalf("fake receiver: %v", err)
		}
		c.Close() // the reader has stopped: local is stable
		for i, cq := range got {
			if cq.ID != uint64(i+1) || cq.Op != qp.OpRead {
				t.Fatalf("completion %d = %+v; want READ %d (in post order)", i, cq, i+1)
			}
		}
		for i := range n {
			for j := wrLen; j < stride; j++ { // the guard bytes after each destination
				if local[i*stride+j] != 0xEE {
					t.Fatalf("guard byte %d after READ %d's destination changed to %#x", j-wrLen, i+1, local[i*stride+j])
				}
			}
			if got[i].Status != qp.StatusOK {
				continue
			}
			// An OK READ was answered: its destination holds a
			// response's bytes (the fuzzer's, somewhere in answer).
			if d := local[i*stride : i*stride+wrLen]; !bytes.Contains(answer, d) {
				t.Fatalf("READ %d completed OK but its destination %x is no response's bytes", i+1, d)
			}
		}
	})
}
