package tcp

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/mptx-dev/mptx/units"
)

// MinSecret is the shortest accepted shared secret, in bytes. Length is
// not entropy: see Secrets in the package doc.
const MinSecret = 16

// MaxPaths is the most paths one connection may have (multipath.MaxPaths).
const MaxPaths = 64

// Version is the wire protocol version this package speaks. Version 2
// keys its tags with an HKDF-derived key instead of the secret itself.
const Version = 2

// DefaultHandshakeTimeout bounds a handshake when the context has no
// deadline, and how long a listener keeps a half-open connection.
const DefaultHandshakeTimeout = 10 * time.Second

// Errors. They are wrapped with detail; match them with errors.Is.
var (
	// ErrAuth: the peer does not know the shared secret.
	ErrAuth = errors.New("tcp: authentication failed")
	// ErrProtocol: the peer sent something that is not this protocol.
	ErrProtocol = errors.New("tcp: protocol error")
	// ErrRefused: the receiver authenticated a rejoin (Conn.Reset) but
	// cannot take it: it no longer has the connection (closed, or not
	// accepted by this listener), or the path is still healthy on its side.
	ErrRefused = errors.New("tcp: rejoin refused")
)

const (
	magic    = "MPTT"
	nonceLen = 32
	tagLen   = sha256.Size
	idLen    = 16

	helloLen  = len(magic) + 2 + nonceLen         // step 1
	proofLen  = nonceLen + idLen + 2 + 2 + tagLen // step 2
	acceptLen = 1 + 8 + 4 + tagLen                // step 4

	verdictAccept byte = 0xA5
	verdictReject byte = 0x5A
	// verdictRefuse answers an authenticated rejoin the receiver cannot
	// take; it is only ever sent after a valid proof.
	verdictRefuse byte = 0x3C

	labelClient = "mptx-tcp/2 client"
	labelServer = "mptx-tcp/2 server"
	// A rejoin (Conn.Reset) signs with its own labels, so that its proof
	// can never be taken for a first join's, nor the other way round.
	labelRejoinClient = "mptx-tcp/2 rejoin client"
	labelRejoinServer = "mptx-tcp/2 rejoin server"

	// keySalt and keyInfo select the handshake key that HKDF derives
	// from the secret (see deriveKey).
	keySalt = "mptx-tcp/2"
	keyInfo = "handshake tags"
)

// ConnID identifies one connection (all its paths) during the handshake.
// The sender draws it at random.
type ConnID [idLen]byte

// String returns the id in hex.
func (id ConnID) String() string { return hex.EncodeToString(id[:]) }

func checkSecret(secret []byte) error {
	if len(secret) < MinSecret {
		return fmt.Errorf("tcp: Secret is %d bytes (valid: at least %d; use e.g. 32 random bytes)", len(secret), MinSecret)
	}
	return nil
}

// deriveKey returns the handshake key, HKDF-SHA256(secret, salt keySalt,
// info keyInfo) of 32 bytes (RFC 5869): every tag is an HMAC under it,
// never under the secret itself, so the secret's length and format do not
// matter to HMAC and the key is bound to this protocol (the verbs
// bootstrap derives its own from the same secret).
func deriveKey(secret []byte) ([]byte, error) {
	k, err := hkdf.Key(sha256.New, secret, []byte(keySalt), keyInfo, sha256.Size)
	if err != nil {
		return nil, fmt.Errorf("tcp: deriving the handshake key: %w", err)
	}
	return k, nil
}

// binding is what both tags of one path cover besides the labels. rejoin
// selects the rejoin labels.
type binding struct {
	nonceS, nonceC [nonceLen]byte
	id             ConnID
	index, count   uint16
	rejoin         bool
}

func (b *binding) clientTag(key []byte) []byte {
	label := labelClient
	if b.rejoin {
		label = labelRejoinClient
	}
	h := hmac.New(sha256.New, key)
	h.Write([]byte(label))
	h.Write(b.nonceS[:])
	h.Write(b.nonceC[:])
	h.Write(b.id[:])
	var ic [4]byte
	binary.BigEndian.PutUint16(ic[0:], b.index)
	binary.BigEndian.PutUint16(ic[2:], b.count)
	h.Write(ic[:])
	return h.Sum(nil)
}

func (b *binding) serverTag(key []byte, region uint64, qpn uint32) []byte {
	label := labelServer
	if b.rejoin {
		label = labelRejoinServer
	}
	h := hmac.New(sha256.New, key)
	h.Write([]byte(label))
	h.Write(b.nonceC[:])
	h.Write(b.nonceS[:])
	h.Write(b.id[:])
	var rest [16]byte
	binary.BigEndian.PutUint16(rest[0:], b.index)
	binary.BigEndian.PutUint16(rest[2:], b.count)
	binary.BigEndian.PutUint64(rest[4:], region)
	binary.BigEndian.PutUint32(rest[12:], qpn)
	h.Write(rest[:])
	return h.Sum(nil)
}

// ioErr describes an I/O error during step, preferring the context's error
// when it caused the failure.
func ioErr(ctx context.Context, step string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("tcp: %s: %w", step, ctx.Err())
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The socket's deadline is the context's: report its expiry
		// even if the context's own timer has not fired yet.
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			return fmt.Errorf("tcp: %s: %w", step, context.DeadlineExceeded)
		}
		return fmt.Errorf("tcp: %s: timed out: %w", step, err)
	}
	return fmt.Errorf("tcp: %s: %w", step, err)
}

// clientHello runs steps 1 and 2 on a fresh path connection (a rejoin when
// b.rejoin is set).
func clientHello(ctx context.Context, conn net.Conn, key []byte, b *binding) error {
	var hello [helloLen]byte
	if _, err := io.ReadFull(conn, hello[:]); err != nil {
		return ioErr(ctx, fmt.Sprintf("path %d: reading the receiver's hello", b.index), err)
	}
	if string(hello[:len(magic)]) != magic {
		return fmt.Errorf("%w: path %d: hello starts with %q, want %q (not an mptx TCP receiver?)", ErrProtocol, b.index, hello[:len(magic)], magic)
	}
	if v := binary.BigEndian.Uint16(hello[len(magic):]); v != Version {
		return fmt.Errorf("%w: path %d: receiver speaks version %d, we speak %d", ErrProtocol, b.index, v, Version)
	}
	copy(b.nonceS[:], hello[len(magic)+2:])
	if _, err := rand.Read(b.nonceC[:]); err != nil {
		return fmt.Errorf("tcp: random nonce: %w", err)
	}
	var proof [proofLen]byte
	p := proof[:0]
	p = append(p, b.nonceC[:]...)
	p = append(p, b.id[:]...)
	p = binary.BigEndian.AppendUint16(p, b.index)
	p = binary.BigEndian.AppendUint16(p, b.count)
	p = append(p, b.clientTag(key)...)
	if _, err := conn.Write(p); err != nil {
		return ioErr(ctx, fmt.Sprintf("path %d: sending our proof", b.index), err)
	}
	return nil
}

// clientVerdict runs the sender's half of step 4: it reads the receiver's
// verdict and proof and returns the region size and the receiver's QPN.
func clientVerdict(ctx context.Context, conn net.Conn, key []byte, b *binding) (region uint64, qpn uint32, err error) {
	var buf [acceptLen]byte
	if _, err := io.ReadFull(conn, buf[:1]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w (the receiver closed the connection: wrong secret, or it is full?)", err)
		}
		return 0, 0, ioErr(ctx, fmt.Sprintf("path %d: reading the receiver's verdict", b.index), err)
	}
	switch {
	case buf[0] == verdictReject:
		return 0, 0, fmt.Errorf("%w: path %d: the receiver rejected our proof (different shared secret)", ErrAuth, b.index)
	case buf[0] == verdictRefuse && b.rejoin:
		return 0, 0, fmt.Errorf("%w: path %d: the receiver no longer has connection %v, or the path is still healthy on its side", ErrRefused, b.index, b.id)
	case buf[0] == verdictAccept:
	default:
		return 0, 0, fmt.Errorf("%w: path %d: verdict byte %#x (valid: %#x, %#x)", ErrProtocol, b.index, buf[0], verdictAccept, verdictReject)
	}
	if _, err := io.ReadFull(conn, buf[1:]); err != nil {
		return 0, 0, ioErr(ctx, fmt.Sprintf("path %d: reading the receiver's proof", b.index), err)
	}
	region = binary.BigEndian.Uint64(buf[1:])
	qpn = binary.BigEndian.Uint32(buf[9:])
	if !hmac.Equal(buf[13:], b.serverTag(key, region, qpn)) {
		return 0, 0, fmt.Errorf("%w: path %d: the receiver does not know the shared secret", ErrAuth, b.index)
	}
	if region > uint64(units.MaxBytes) {
		// Authentic, but no region of that size can exist here, and as
		// units.Bytes it would turn negative.
		return 0, 0, fmt.Errorf("%w: path %d: the receiver advertises a %d-byte region (valid: 0..%d)", ErrProtocol, b.index, region, int64(units.MaxBytes))
	}
	return region, qpn, nil
}

// serverHello runs steps 1 to 3 on an accepted connection: on success b
// holds the sender's connection id, path index and count, and whether the
// proof was a rejoin's (signed with the rejoin label) or a first join's. On
// an authentication failure it writes the reject byte; the caller closes
// conn on any error.
func serverHello(conn net.Conn, key []byte, b *binding) error {
	var hello [helloLen]byte
	copy(hello[:], magic)
	binary.BigEndian.PutUint16(hello[len(magic):], Version)
	if _, err := rand.Read(b.nonceS[:]); err != nil {
		return fmt.Errorf("tcp: random nonce: %w", err)
	}
	copy(hello[len(magic)+2:], b.nonceS[:])
	if _, err := conn.Write(hello[:]); err != nil {
		return fmt.Errorf("tcp: sending hello to %s: %w", conn.RemoteAddr(), err)
	}
	var proof [proofLen]byte
	if _, err := io.ReadFull(conn, proof[:]); err != nil {
		return fmt.Errorf("tcp: reading the proof of %s: %w", conn.RemoteAddr(), err)
	}
	copy(b.nonceC[:], proof[0:])
	copy(b.id[:], proof[nonceLen:])
	b.index = binary.BigEndian.Uint16(proof[nonceLen+idLen:])
	b.count = binary.BigEndian.Uint16(proof[nonceLen+idLen+2:])
	tag := proof[nonceLen+idLen+4:]
	if !hmac.Equal(tag, b.clientTag(key)) {
		b.rejoin = true
		if !hmac.Equal(tag, b.clientTag(key)) {
			_, _ = conn.Write([]byte{verdictReject})
			return fmt.Errorf("%w: %s does not know the shared secret", ErrAuth, conn.RemoteAddr())
		}
	}
	if b.count < 1 || b.count > MaxPaths || b.index >= b.count {
		return fmt.Errorf("%w: %s: path index %d of %d (valid: count 1..%d, index < count)", ErrProtocol, conn.RemoteAddr(), b.index, b.count, MaxPaths)
	}
	return nil
}

// serverAccept runs the receiver's half of step 4 (of a rejoin too, when
// b.rejoin is set).
func serverAccept(conn net.Conn, key []byte, b *binding, region uint64, qpn uint32) error {
	var buf [acceptLen]byte
	buf[0] = verdictAccept
	binary.BigEndian.PutUint64(buf[1:], region)
	binary.BigEndian.PutUint32(buf[9:], qpn)
	copy(buf[13:], b.serverTag(key, region, qpn))
	if _, err := conn.Write(buf[:]); err != nil {
		return fmt.Errorf("tcp: path %d: sending our proof to %s: %w", b.index, conn.RemoteAddr(), err)
	}
	return nil
}

// serverRefuse answers an authenticated rejoin that the receiver cannot
// take. The handshake deadline may have passed while the rejoin waited for
// its path; one byte into an idle socket does not block, but the write
// needs a deadline that has not.
func serverRefuse(conn net.Conn) {
	_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = conn.Write([]byte{verdictRefuse})
}
