package tcp_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/qp/tcp"
	"github.com/mptx-dev/mptx/qp/tcp/internal/leak"
)

// Hostile peers: what a peer without the secret, or one with it that
// misbehaves, can do to the other end (issue 14).

// authKey is the HMAC key both ends derive from secret (package doc,
// Handshake).
func authKey(secret []byte) []byte { return secret }

// serverProof is step 4's message for one path: accept byte ‖ region ‖ QPN
// ‖ HMAC(key, "mptx-tcp/1 server" ‖ nonceC ‖ nonceS ‖ id ‖ index ‖ count ‖
// region ‖ QPN), following the package doc's byte layout.
func serverProof(key, nonceS, nonceC, id []byte, index, count uint16, region uint64, qpn uint32) []byte {
	var rest [16]byte
	binary.BigEndian.PutUint16(rest[0:], index)
	binary.BigEndian.PutUint16(rest[2:], count)
	binary.BigEndian.PutUint64(rest[4:], region)
	binary.BigEndian.PutUint32(rest[12:], qpn)
	m := hmac.New(sha256.New, key)
	m.Write([]byte("mptx-tcp/1 server"))
	m.Write(nonceC)
	m.Write(nonceS)
	m.Write(id)
	m.Write(rest[:])
	out := []byte{0xA5}
	out = binary.BigEndian.AppendUint64(out, region)
	out = binary.BigEndian.AppendUint32(out, qpn)
	return append(out, m.Sum(nil)...)
}

// TestHugeRegionRefused: a receiver that knows the secret advertises a
// region of 2^64-1 bytes. Dial refuses it with ErrProtocol instead of
// returning a Conn whose RegionSize is negative.
func TestHugeRegionRefused(t *testing.T) {
	leak.Check(t)
	for _, region := range []uint64{1<<64 - 1, 1 << 63} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			defer nc.Close()
			nonceS := make([]byte, 32)
			nc.Write(append([]byte("MPTT\x00\x01"), nonceS...))
			buf := make([]byte, 84)
			if _, err := io.ReadFull(nc, buf); err != nil {
				return
			}
			nonceC, id := buf[:32], buf[32:48]
			idx, cnt := binary.BigEndian.Uint16(buf[48:]), binary.BigEndian.Uint16(buf[50:])
			nc.Write(serverProof(authKey(secret), nonceS, nonceC, id, idx, cnt, region, 0x100))
			io.Copy(io.Discard, nc)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := tcp.Dial(ctx, l.Addr().String(), tcp.DialConfig{Secret: secret, Paths: make([]tcp.PathConfig, 1)})
		cancel()
		if err == nil {
			t.Errorf("Dial to a receiver advertising a %d-byte region succeeded (RegionSize() = %d); want ErrProtocol", region, c.RegionSize())
			c.Close()
			continue
		}
		if !errors.Is(err, tcp.ErrProtocol) {
			t.Errorf("Dial to a receiver advertising a %d-byte region: %v; want ErrProtocol", region, err)
		}
	}
}
