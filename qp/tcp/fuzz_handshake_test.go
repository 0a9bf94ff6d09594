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

	"github.com/mptx-dev/mptx/units"
)

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
