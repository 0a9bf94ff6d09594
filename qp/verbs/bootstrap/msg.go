package bootstrap

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MaxPayload is the largest frame payload, in bytes.
const MaxPayload = 64 << 10

// MaxPaths is the most path endpoints a message may carry.
const MaxPaths = 256

// Type is a frame's message type.
type Type uint8

// Message types.
const (
	TypeOffer       Type = 1
	TypeAccept      Type = 2
	TypeReady       Type = 3
	TypeReceipt     Type = 4
	TypeAbort       Type = 5
	TypeTransfer    Type = 6
	TypeTransferAck Type = 7
	TypeResetPath   Type = 8
	TypeResetAck    Type = 9
)

// String returns the type's name.
func (t Type) String() string {
	switch t {
	case TypeOffer:
		return "Offer"
	case TypeAccept:
		return "Accept"
	case TypeReady:
		return "Ready"
	case TypeReceipt:
		return "Receipt"
	case TypeAbort:
		return "Abort"
	case TypeTransfer:
		return "Transfer"
	case TypeTransferAck:
		return "TransferAck"
	case TypeResetPath:
		return "ResetPath"
	case TypeResetAck:
		return "ResetAck"
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Capability flags (Offer.Caps, Accept.Caps).
const (
	// CapCRC: the sender supplies the tensor's CRC-32C in Offer.CRC32C and
	// the receiver checks it before its Receipt.
	CapCRC uint32 = 1 << iota
	// CapTimestamps: the side has NIC completion timestamps.
	CapTimestamps
	// CapHWRateLimit: the side can rate-limit each QP in hardware.
	CapHWRateLimit
	// CapMemoryWindow: the receive region is exposed through memory
	// windows bound per path (type 2) rather than a dedicated MR.
	CapMemoryWindow
)

// Endpoint is one end of one path (one RC queue pair).
type Endpoint struct {
	QPN       uint32   // queue pair number (24 bits)
	PSN       uint32   // initial packet sequence number (24 bits)
	GID       [16]byte // the QP's source GID (RoCEv2: IPv4-mapped or IPv6 address)
	MTU       uint32   // active path MTU in bytes (256..4096)
	FlowLabel uint32   // IPv6 flow label the peer should use towards us (20 bits), 0 for none
	Rkey      uint32   // Accept only: the rkey that opens the region on this path
	NIC       uint16   // index of the NIC within its host's list
	Device    string   // device name, for diagnostics ("rxe0", "mlx5_1")
}

// Offer is the sender's proposal: the tensor and its side of every path.
type Offer struct {
	Caps      uint32
	Size      uint64 // tensor bytes; the receiver advertises a region of exactly this size
	ChunkSize uint64 // bytes per chunk (informational; the receiver tracks chunks by immediate)
	CRC32C    uint32 // valid when Caps&CapCRC
	Name      string // file or tensor name, for display
	Paths     []Endpoint
}

// Accept is the receiver's answer: its side of every path (in the order of
// the Offer's paths) and the region the sender may write.
type Accept struct {
	Caps       uint32
	RegionAddr uint64 // virtual address of the region in the receiver (what RDMA WRITE targets)
	RegionLen  uint64 // bytes
	Paths      []Endpoint
}

// Transfer announces one transfer on an established connection, before
// its first byte is posted: what the receiver needs to track it (the
// engine's slot, the chunk plan and where in the region it lands) and,
// optionally, the tensor's CRC-32C.
type Transfer struct {
	ID        uint64 // the sender's transfer id
	Slot      uint32 // immediate slot (chunk.EncodeImm)
	Size      uint64 // tensor bytes
	ChunkSize uint64 // bytes per chunk but possibly the last
	Count     uint32 // chunks
	Remote    uint64 // offset of the tensor in the advertised region
	CRC       bool   // CRC32C is set
	CRC32C    uint32
}

// ResetPath asks the receiver to bring one path's queue pair back from the
// error state (RESET → INIT → RTR → RTS, ibv_modify_qp(3)) expecting the
// sender's fresh packet sequence number.
type ResetPath struct {
	Path uint16
	QPN  uint32 // the sender's QPN on that path (unchanged by a reset)
	PSN  uint32 // the sender's new send PSN: the receiver's new expected PSN
	// Seq numbers the sender's resets on the connection; the ResetAck
	// echoes it, so that the answer to a reset that timed out cannot be
	// taken for the answer to a later one.
	Seq uint32
}

// ResetAck answers ResetPath.
type ResetAck struct {
	Path    uint16
	Seq     uint32 // the ResetPath's
	OK      bool
	PSN     uint32 // the receiver's new send PSN
	Rkey    uint32 // the rkey that opens the region on this path now (0: unchanged)
	Message string // why not OK
}

// Receipt is the receiver's verdict after the transfer.
type Receipt struct {
	ID      uint64 // the transfer's id
	OK      bool
	Bytes   uint64 // bytes the receiver saw complete
	CRC32C  uint32 // CRC-32C the receiver computed (0 if not checked)
	Message string // why not OK, or a note
}

// Abort ends the exchange with a reason.
type Abort struct{ Reason string }

// --- encoding ---

type enc struct{ b []byte }

func (e *enc) u8(v uint8)   { e.b = append(e.b, v) }
func (e *enc) u16(v uint16) { e.b = binary.BigEndian.AppendUint16(e.b, v) }
func (e *enc) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *enc) u64(v uint64) { e.b = binary.BigEndian.AppendUint64(e.b, v) }

// maxString is the longest string a message carries, in bytes; longer
// ones are cut when encoded and refused when decoded.
const maxString = 1024

func (e *enc) str(s string) {
	if len(s) > maxString {
		s = s[:maxString]
	}
	e.u16(uint16(len(s)))
	e.b = append(e.b, s...)
}
func (e *enc) endpoints(ps []Endpoint) {
	e.u16(uint16(len(ps)))
	for _, p := range ps {
		e.u32(p.QPN)
		e.u32(p.PSN)
		e.b = append(e.b, p.GID[:]...)
		e.u32(p.MTU)
		e.u32(p.FlowLabel)
		e.u32(p.Rkey)
		e.u16(p.NIC)
		e.str(p.Device)
	}
}

type dec struct {
	b   []byte
	err error
}

func (d *dec) need(n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.b) < n {
		d.err = fmt.Errorf("%w: message truncated", ErrProtocol)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}
func (d *dec) u8() uint8 {
	if v := d.need(1); v != nil {
		return v[0]
	}
	return 0
}
func (d *dec) u16() uint16 {
	if v := d.need(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}
func (d *dec) u32() uint32 {
	if v := d.need(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}
func (d *dec) u64() uint64 {
	if v := d.need(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}
func (d *dec) str() string {
	n := int(d.u16())
	if n > maxString && d.err == nil {
		d.err = fmt.Errorf("%w: a %d-byte string, at most %d", ErrProtocol, n, maxString)
	}
	return string(d.need(n))
}

// bool decodes a boolean byte: 0 or 1, anything else is a protocol error
// (so that every message has exactly one encoding).
func (d *dec) bool() bool {
	v := d.u8()
	if v > 1 && d.err == nil {
		d.err = fmt.Errorf("%w: boolean byte %#x (valid: 0, 1)", ErrProtocol, v)
	}
	return v == 1
}
func (d *dec) endpoints() []Endpoint {
	n := int(d.u16())
	if n > MaxPaths {
		d.err = fmt.Errorf("%w: %d paths, at most %d", ErrProtocol, n, MaxPaths)
		return nil
	}
	ps := make([]Endpoint, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		var p Endpoint
		p.QPN = d.u32()
		p.PSN = d.u32()
		copy(p.GID[:], d.need(16))
		p.MTU = d.u32()
		p.FlowLabel = d.u32()
		p.Rkey = d.u32()
		p.NIC = d.u16()
		p.Device = d.str()
		ps = append(ps, p)
	}
	return ps
}
func (d *dec) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrProtocol, len(d.b))
	}
	return d.err
}

// Marshal forms.

func (m *Offer) marshal(e *enc) {
	e.u32(m.Caps)
	e.u64(m.Size)
	e.u64(m.ChunkSize)
	e.u32(m.CRC32C)
	e.str(m.Name)
	e.endpoints(m.Paths)
}

func (m *Offer) unmarshal(d *dec) {
	m.Caps = d.u32()
	m.Size = d.u64()
	m.ChunkSize = d.u64()
	m.CRC32C = d.u32()
	m.Name = d.str()
	m.Paths = d.endpoints()
}

func (m *Accept) marshal(e *enc) {
	e.u32(m.Caps)
	e.u64(m.RegionAddr)
	e.u64(m.RegionLen)
	e.endpoints(m.Paths)
}

func (m *Accept) unmarshal(d *dec) {
	m.Caps = d.u32()
	m.RegionAddr = d.u64()
	m.RegionLen = d.u64()
	m.Paths = d.endpoints()
}

func (m *ResetPath) marshal(e *enc) {
	e.u16(m.Path)
	e.u32(m.QPN)
	e.u32(m.PSN)
	e.u32(m.Seq)
}

func (m *ResetPath) unmarshal(d *dec) {
	m.Path = d.u16()
	m.QPN = d.u32()
	m.PSN = d.u32()
	m.Seq = d.u32()
}

func (m *ResetAck) marshal(e *enc) {
	e.u16(m.Path)
	e.u32(m.Seq)
	e.u8(boolByte(m.OK))
	e.u32(m.PSN)
	e.u32(m.Rkey)
	e.str(m.Message)
}

func (m *ResetAck) unmarshal(d *dec) {
	m.Path = d.u16()
	m.Seq = d.u32()
	m.OK = d.bool()
	m.PSN = d.u32()
	m.Rkey = d.u32()
	m.Message = d.str()
}

func (m *Transfer) marshal(e *enc) {
	e.u64(m.ID)
	e.u32(m.Slot)
	e.u64(m.Size)
	e.u64(m.ChunkSize)
	e.u32(m.Count)
	e.u64(m.Remote)
	e.u8(boolByte(m.CRC))
	e.u32(m.CRC32C)
}

func (m *Transfer) unmarshal(d *dec) {
	m.ID = d.u64()
	m.Slot = d.u32()
	m.Size = d.u64()
	m.ChunkSize = d.u64()
	m.Count = d.u32()
	m.Remote = d.u64()
	m.CRC = d.bool()
	m.CRC32C = d.u32()
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func (m *Receipt) marshal(e *enc) {
	e.u64(m.ID)
	e.u8(boolByte(m.OK))
	e.u64(m.Bytes)
	e.u32(m.CRC32C)
	e.str(m.Message)
}

func (m *Receipt) unmarshal(d *dec) {
	m.ID = d.u64()
	m.OK = d.bool()
	m.Bytes = d.u64()
	m.CRC32C = d.u32()
	m.Message = d.str()
}

// --- framing ---

func (s *Session) tag(dir byte, seq uint64, t Type, payload []byte) []byte {
	h := hmac.New(sha256.New, s.key[:])
	var hdr [10]byte
	hdr[0] = dir
	binary.BigEndian.PutUint64(hdr[1:], seq)
	hdr[9] = byte(t)
	h.Write(hdr[:])
	h.Write(payload)
	return h.Sum(nil)
}

func (s *Session) dir(sending bool) byte {
	if s.server == sending {
		return 'S'
	}
	return 'C'
}

func (s *Session) writeFrame(ctx context.Context, t Type, payload []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if len(payload) > MaxPayload {
		return fmt.Errorf("bootstrap: %s payload is %d bytes, at most %d", t, len(payload), MaxPayload)
	}
	s.buf = s.buf[:0]
	s.buf = binary.BigEndian.AppendUint32(s.buf, uint32(len(payload)))
	s.buf = append(s.buf, byte(t))
	s.buf = append(s.buf, payload...)
	s.buf = append(s.buf, s.tag(s.dir(true), s.sendSeq, t, payload)...)
	s.sendSeq++
	undo := deadline(ctx, s.conn.SetWriteDeadline, 0)
	defer undo()
	if _, err := s.conn.Write(s.buf); err != nil {
		return ioErr(ctx, "sending "+t.String(), err)
	}
	return nil
}

func (s *Session) readFrame(ctx context.Context) (Type, []byte, error) {
	undo := deadline(ctx, s.conn.SetReadDeadline, 0)
	defer undo()
	var hdr [5]byte
	if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, nil, fmt.Errorf("bootstrap: peer closed the control connection: %w", io.EOF)
		}
		return 0, nil, ioErr(ctx, "reading frame", err)
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n > MaxPayload {
		return 0, nil, fmt.Errorf("%w: frame of %d bytes, at most %d", ErrProtocol, n, MaxPayload)
	}
	t := Type(hdr[4])
	body := make([]byte, int(n)+tagLen)
	if _, err := io.ReadFull(s.r, body); err != nil {
		return 0, nil, ioErr(ctx, "reading frame body", err)
	}
	payload, tag := body[:n], body[n:]
	if !hmac.Equal(tag, s.tag(s.dir(false), s.recvSeq, t, payload)) {
		return 0, nil, fmt.Errorf("%w (%s frame #%d)", ErrIntegrity, t, s.recvSeq)
	}
	s.recvSeq++
	return t, payload, nil
}

// message is implemented by the typed messages with a payload.
type message interface {
	marshal(*enc)
	unmarshal(*dec)
}

func (s *Session) send(ctx context.Context, t Type, m message) error {
	var e enc
	if m != nil {
		m.marshal(&e)
	}
	return s.writeFrame(ctx, t, e.b)
}

// recv reads the next frame and decodes it into m, which must be of type
// want. An Abort frame yields ErrAborted with the peer's reason.
func (s *Session) recv(ctx context.Context, want Type, m message) error {
	t, payload, err := s.readFrame(ctx)
	if err != nil {
		return err
	}
	d := &dec{b: payload}
	if t == TypeAbort {
		reason := d.str()
		return fmt.Errorf("%w: %s", ErrAborted, reason)
	}
	if t != want {
		return &FrameError{Type: t, Want: want, Payload: payload}
	}
	if m != nil {
		m.unmarshal(d)
	}
	return d.done()
}

// SendOffer sends the sender's Offer.
func (s *Session) SendOffer(ctx context.Context, m *Offer) error {
	if len(m.Paths) == 0 || len(m.Paths) > MaxPaths {
		return fmt.Errorf("bootstrap: Offer has %d paths, want 1..%d", len(m.Paths), MaxPaths)
	}
	return s.send(ctx, TypeOffer, m)
}

// RecvOffer reads the sender's Offer.
func (s *Session) RecvOffer(ctx context.Context) (*Offer, error) {
	m := new(Offer)
	if err := s.recv(ctx, TypeOffer, m); err != nil {
		return nil, err
	}
	if len(m.Paths) == 0 {
		return nil, fmt.Errorf("%w: Offer has no paths", ErrProtocol)
	}
	return m, nil
}

// SendAccept sends the receiver's Accept.
func (s *Session) SendAccept(ctx context.Context, m *Accept) error { return s.send(ctx, TypeAccept, m) }

// RecvAccept reads the receiver's Accept.
func (s *Session) RecvAccept(ctx context.Context) (*Accept, error) {
	m := new(Accept)
	if err := s.recv(ctx, TypeAccept, m); err != nil {
		return nil, err
	}
	return m, nil
}

// SendReady tells the receiver that the sender's queue pairs are ready to send.
func (s *Session) SendReady(ctx context.Context) error { return s.send(ctx, TypeReady, nil) }

// RecvReady waits for the sender's Ready.
func (s *Session) RecvReady(ctx context.Context) error { return s.recv(ctx, TypeReady, nil) }

// SendTransfer announces a transfer (sender).
func (s *Session) SendTransfer(ctx context.Context, m *Transfer) error {
	return s.send(ctx, TypeTransfer, m)
}

// RecvTransfer waits for the next transfer announcement (receiver).
func (s *Session) RecvTransfer(ctx context.Context) (*Transfer, error) {
	m := new(Transfer)
	if err := s.recv(ctx, TypeTransfer, m); err != nil {
		return nil, err
	}
	return m, nil
}

// SendTransferAck tells the sender the receiver tracks the transfer and it
// may start posting (receiver).
func (s *Session) SendTransferAck(ctx context.Context, m *Transfer) error {
	return s.send(ctx, TypeTransferAck, m)
}

// RecvTransferAck waits for the receiver's acknowledgement of an
// announcement (sender).
func (s *Session) RecvTransferAck(ctx context.Context) (*Transfer, error) {
	m := new(Transfer)
	if err := s.recv(ctx, TypeTransferAck, m); err != nil {
		return nil, err
	}
	return m, nil
}

// SendReceipt sends the receiver's verdict.
func (s *Session) SendReceipt(ctx context.Context, m *Receipt) error {
	return s.send(ctx, TypeReceipt, m)
}

// RecvReceipt waits for the receiver's verdict.
func (s *Session) RecvReceipt(ctx context.Context) (*Receipt, error) {
	m := new(Receipt)
	if err := s.recv(ctx, TypeReceipt, m); err != nil {
		return nil, err
	}
	return m, nil
}

// SendResetPath asks the receiver to reset a path (sender).
func (s *Session) SendResetPath(ctx context.Context, m *ResetPath) error {
	return s.send(ctx, TypeResetPath, m)
}

// SendResetAck answers a ResetPath (receiver).
func (s *Session) SendResetAck(ctx context.Context, m *ResetAck) error {
	return s.send(ctx, TypeResetAck, m)
}

// Recv reads the next frame whatever its type and returns it decoded (see
// Decode). An Abort frame yields ErrAborted with the peer's reason.
func (s *Session) Recv(ctx context.Context) (Type, any, error) {
	t, payload, err := s.readFrame(ctx)
	if err != nil {
		return 0, nil, err
	}
	m, err := Decode(t, payload)
	return t, m, err
}

// Decode decodes the payload of a bootstrap frame of type t: *Offer,
// *Accept, *Transfer (for Transfer and TransferAck), *Receipt, *ResetPath,
// *ResetAck, or nil for Ready. An Abort yields ErrAborted with the peer's
// reason; an application type (TypeApp and up) or an unknown one,
// ErrProtocol. It is what Recv applies to the frames it reads, for frames
// read through a Mux.
func Decode(t Type, payload []byte) (any, error) {
	d := &dec{b: payload}
	var m message
	switch t {
	case TypeAbort:
		return nil, fmt.Errorf("%w: %s", ErrAborted, d.str())
	case TypeReady:
		return nil, d.done()
	case TypeOffer:
		m = new(Offer)
	case TypeAccept:
		m = new(Accept)
	case TypeTransfer, TypeTransferAck:
		m = new(Transfer)
	case TypeReceipt:
		m = new(Receipt)
	case TypeResetPath:
		m = new(ResetPath)
	case TypeResetAck:
		m = new(ResetAck)
	default:
		return nil, &FrameError{Type: t, Payload: payload}
	}
	m.unmarshal(d)
	if err := d.done(); err != nil {
		return nil, err
	}
	return m, nil
}

// FrameError is a well-formed, authenticated frame of another type than
// the one awaited (the Recv* methods), or one Decode does not know. It
// wraps ErrProtocol, and it carries the frame, so that the layer above can
// act on it: an mptx session whose peer gives up on verbs sends an
// application frame where the verbs exchange expected its next message,
// and the session falls back to TCP on the same channel.
type FrameError struct {
	Type    Type   // what arrived
	Want    Type   // what was awaited; 0 for Decode
	Payload []byte // its payload
}

func (e *FrameError) Error() string {
	if e.Want == 0 {
		return fmt.Sprintf("%v: unknown frame type %d", ErrProtocol, uint8(e.Type))
	}
	return fmt.Sprintf("%v: got %s, want %s", ErrProtocol, e.Type, e.Want)
}

// Is reports whether target is ErrProtocol.
func (e *FrameError) Is(target error) bool { return target == ErrProtocol }

// SendAbort tells the peer why we give up. Errors are ignored by design:
// the connection is about to be closed anyway.
func (s *Session) SendAbort(ctx context.Context, reason string) {
	var e enc
	e.str(reason)
	_ = s.writeFrame(ctx, TypeAbort, e.b)
}
