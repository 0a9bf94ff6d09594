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
