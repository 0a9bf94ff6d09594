package tcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

// keyedFrame builds a keyed data frame.
func keyedFrame(op byte, seq uint32, remote uint64, length, imm, key uint32, payload []byte) []byte {
	b := frame(op, 0, seq, remote, length, imm, nil)
	b = binary.BigEndian.AppendUint32(b, key)
	return append(b, payload...)
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
