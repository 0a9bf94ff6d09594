package bootstrap

import (
	"bufio"
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Version is the protocol version this package speaks. Version 2 keys its
// tags with HKDF-derived keys instead of the secret itself; version 3
// numbers path resets (ResetPath.Seq, echoed by ResetAck).
const Version = 3

// MinSecret is the shortest accepted shared secret, in bytes. Length is
// not entropy: see Secrets in the package doc.
const MinSecret = 16

const (
	nonceLen = 32
	tagLen   = sha256.Size
	magic    = "MPTX"

	statusAccept byte = 0xA5
	statusReject byte = 0x5A

	labelClient = "mptx/2 client"
	labelServer = "mptx/2 server"

	// HKDF parameters (RFC 5869) of the keys derived from the secret: the
	// handshake key (salt keySalt, info keyInfo) and the session key (salt
	// nonceS ‖ nonceC, info sessionInfo).
	keySalt     = "mptx/2"
	keyInfo     = "handshake tags"
	sessionInfo = "mptx/2 session"
)

// Errors. They are wrapped with detail; match them with errors.Is.
var (
	// ErrAuth: the peer does not know the shared secret (or we do not
	// know the peer's).
	ErrAuth = errors.New("bootstrap: authentication failed")
	// ErrProtocol: the peer sent something that is not this protocol.
	ErrProtocol = errors.New("bootstrap: protocol error")
	// ErrIntegrity: a frame's tag did not verify (altered, replayed,
	// reordered or reflected).
	ErrIntegrity = errors.New("bootstrap: frame integrity check failed")
	// ErrAborted: the peer sent Abort; the wrapped message says why.
	ErrAborted = errors.New("bootstrap: peer aborted")
)

// DefaultHandshakeTimeout bounds authentication when the context has no
// deadline, so that a silent peer cannot hold a listener's slot forever.
const DefaultHandshakeTimeout = 10 * time.Second

// Session is an authenticated control channel. Its zero value is not
// usable; get one from Client or Server. Sends may come from several
// goroutines (they are serialised); receives must come from one.
type Session struct {
	wmu    sync.Mutex // serialises frames (and the send sequence)
	conn   net.Conn
	r      *bufio.Reader
	key    [tagLen]byte
	server bool
	sendSeq,
	recvSeq uint64
	buf []byte // frame scratch
}

// checkSecret validates a shared secret.
func checkSecret(secret []byte) error {
	if len(secret) < MinSecret {
		return fmt.Errorf("bootstrap: secret is %d bytes; need at least %d (use e.g. 32 random bytes)", len(secret), MinSecret)
	}
	return nil
}

// handshakeKey returns HKDF-SHA256(secret, salt keySalt, info keyInfo),
// the key of the handshake's tags: HMAC is never keyed with the secret
// itself, and the key is this protocol's alone (qp/tcp derives another
// from the same secret).
func handshakeKey(secret []byte) ([]byte, error) {
	k, err := hkdf.Key(sha256.New, secret, []byte(keySalt), keyInfo, tagLen)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: deriving the handshake key: %w", err)
	}
	return k, nil
}

// sessionKey returns HKDF-SHA256(secret, salt nonceS ‖ nonceC, info
// sessionInfo): fresh per connection, so frames of one session are
// worthless in another.
func sessionKey(secret, nonceS, nonceC []byte) ([tagLen]byte, error) {
	var out [tagLen]byte
	salt := append(append(make([]byte, 0, 2*nonceLen), nonceS...), nonceC...)
	k, err := hkdf.Key(sha256.New, secret, salt, sessionInfo, tagLen)
	if err != nil {
		return out, fmt.Errorf("bootstrap: deriving the session key: %w", err)
	}
	copy(out[:], k)
	return out, nil
}

func mac(key []byte, label string, parts ...[]byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(label))
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(nil)
}

// deadline applies ctx's deadline (or def, when ctx has none and def > 0)
// through set, one of conn's SetDeadline, SetReadDeadline or
// SetWriteDeadline, and makes cancellation of ctx interrupt the blocked
// I/O it governs. The returned func undoes both. A Session's frames are
// written and read by different goroutines (sends from any, receives from
// one), so framing sets only its own direction's deadline: a write's
// deadline must not cut short, or be cleared by, a concurrent read.
func deadline(ctx context.Context, set func(time.Time) error, def time.Duration) func() {
	d, ok := ctx.Deadline()
	if !ok && def > 0 {
		d, ok = time.Now().Add(def), true
	}
	if ok {
		_ = set(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = set(time.Unix(1, 0)) })
	return func() {
		stop()
		_ = set(time.Time{})
	}
}

// ioErr turns an I/O error during step into a descriptive error, preferring
// the context's error when it caused the failure.
func ioErr(ctx context.Context, step string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("bootstrap: %s: %w", step, ctx.Err())
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The connection's deadline is the context's (or the default
		// handshake timeout): report it as the context's expiry even if
		// the context's own timer has not fired yet.
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d.Add(-time.Millisecond)) {
			return fmt.Errorf("bootstrap: %s: %w", step, context.DeadlineExceeded)
		}
		return fmt.Errorf("bootstrap: %s: timed out: %w", step, err)
	}
	return fmt.Errorf("bootstrap: %s: %w", step, err)
}

// Client authenticates to the server at the other end of conn with secret
// (steps 2 and 4 of the package doc). On success the Session owns conn; on
// failure conn is closed. A server that rejects us yields ErrAuth.
func Client(ctx context.Context, conn net.Conn, secret []byte) (*Session, error) {
	if err := checkSecret(secret); err != nil {
		conn.Close()
		return nil, err
	}
	undo := deadline(ctx, conn.SetDeadline, DefaultHandshakeTimeout)
	s, err := clientHandshake(ctx, conn, secret)
	undo()
	if err != nil {
		conn.Close()
		return nil, err
	}
	return s, nil
}

func clientHandshake(ctx context.Context, conn net.Conn, secret []byte) (*Session, error) {
	r := bufio.NewReader(conn)
	var hello [len(magic) + 2 + nonceLen]byte
	if _, err := io.ReadFull(r, hello[:]); err != nil {
		return nil, ioErr(ctx, "reading server hello", err)
	}
	if string(hello[:len(magic)]) != magic {
		return nil, fmt.Errorf("%w: server hello starts with %q, want %q (not an mptx receiver?)", ErrProtocol, hello[:len(magic)], magic)
	}
	if v := binary.BigEndian.Uint16(hello[len(magic):]); v != Version {
		return nil, fmt.Errorf("%w: server speaks version %d, we speak %d", ErrProtocol, v, Version)
	}
	nonceS := hello[len(magic)+2:]
	nonceC := make([]byte, nonceLen)
	if _, err := rand.Read(nonceC); err != nil {
		return nil, fmt.Errorf("bootstrap: random nonce: %w", err)
	}
	key, err := handshakeKey(secret)
	if err != nil {
		return nil, err
	}
	resp := append(append([]byte(nil), nonceC...), mac(key, labelClient, nonceS, nonceC)...)
	if _, err := conn.Write(resp); err != nil {
		return nil, ioErr(ctx, "sending client response", err)
	}
	st, err := r.ReadByte()
	if err != nil {
		return nil, ioErr(ctx, "reading server verdict", fmt.Errorf("%w (the server closed the connection: wrong secret?)", err))
	}
	switch st {
	case statusReject:
		return nil, fmt.Errorf("%w: the server rejected our proof (different shared secret)", ErrAuth)
	case statusAccept:
	default:
		return nil, fmt.Errorf("%w: server verdict byte %#x", ErrProtocol, st)
	}
	proof := make([]byte, tagLen)
	if _, err := io.ReadFull(r, proof); err != nil {
		return nil, ioErr(ctx, "reading server proof", err)
	}
	if !hmac.Equal(proof, mac(key, labelServer, nonceC, nonceS)) {
		return nil, fmt.Errorf("%w: the server does not know the shared secret", ErrAuth)
	}
	s := &Session{conn: conn, r: r}
	if s.key, err = sessionKey(secret, nonceS, nonceC); err != nil {
		return nil, err
	}
	return s, nil
}

// Server authenticates the client at the other end of conn (steps 1 and 3
// of the package doc). It creates nothing and reveals nothing before the
// client's proof verifies. On success the Session owns conn; on failure
// conn is closed and the error wraps ErrAuth or ErrProtocol.
func Server(ctx context.Context, conn net.Conn, secret []byte) (*Session, error) {
	if err := checkSecret(secret); err != nil {
		conn.Close()
		return nil, err
	}
	undo := deadline(ctx, conn.SetDeadline, DefaultHandshakeTimeout)
	s, err := serverHandshake(ctx, conn, secret)
	undo()
	if err != nil {
		conn.Close()
		return nil, err
	}
	return s, nil
}

func serverHandshake(ctx context.Context, conn net.Conn, secret []byte) (*Session, error) {
	hello := make([]byte, len(magic)+2+nonceLen)
	copy(hello, magic)
	binary.BigEndian.PutUint16(hello[len(magic):], Version)
	nonceS := hello[len(magic)+2:]
	if _, err := rand.Read(nonceS); err != nil {
		return nil, fmt.Errorf("bootstrap: random nonce: %w", err)
	}
	if _, err := conn.Write(hello); err != nil {
		return nil, ioErr(ctx, "sending hello", err)
	}
	r := bufio.NewReader(conn)
	resp := make([]byte, nonceLen+tagLen)
	if _, err := io.ReadFull(r, resp); err != nil {
		return nil, ioErr(ctx, "reading client response", err)
	}
	nonceC, tag := resp[:nonceLen], resp[nonceLen:]
	key, err := handshakeKey(secret)
	if err != nil {
		return nil, err
	}
	if !hmac.Equal(tag, mac(key, labelClient, nonceS, nonceC)) {
		_, _ = conn.Write([]byte{statusReject})
		return nil, fmt.Errorf("%w: client %s does not know the shared secret", ErrAuth, conn.RemoteAddr())
	}
	out := append([]byte{statusAccept}, mac(key, labelServer, nonceC, nonceS)...)
	if _, err := conn.Write(out); err != nil {
		return nil, ioErr(ctx, "sending server proof", err)
	}
	s := &Session{conn: conn, r: r, server: true}
	if s.key, err = sessionKey(secret, nonceS, nonceC); err != nil {
		return nil, err
	}
	return s, nil
}

// RemoteAddr returns the peer's address.
func (s *Session) RemoteAddr() net.Addr { return s.conn.RemoteAddr() }

// LocalAddr returns our end's address.
func (s *Session) LocalAddr() net.Addr { return s.conn.LocalAddr() }

// Close closes the control connection. It is idempotent.
func (s *Session) Close() error {
	err := s.conn.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
