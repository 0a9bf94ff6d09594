package mptx

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
	"github.com/mptx-dev/mptx/units"
)

// The session protocol, "mptx-session/2", runs on the authenticated
// control channel of package bootstrap (HMAC-authenticated, sequenced
// frames; every frame below is an application frame, bootstrap.TypeApp
// and up). All integers are big endian; a string is a u16 length and its
// bytes. A sender (the dialer) and a receiver (the acceptor):
//
//	sender                                   receiver
//	Hello{version, transports, paths} ──────▶
//	                                  ◀────── Welcome{transport, data address, region}
//	   (the transport's data paths connect: qp/tcp's own handshake, or
//	    verbs' Offer/Accept/Ready on this same channel, Ready once the
//	    sender's probes crossed every path)
//	NoVerbs{why} ◀─────────────────────────▶  (auto only: an end whose verbs set-up
//	                                  ◀────── Welcome{tcp}   failed sends it in place of
//	                                          its next verbs message; then TCP)
//	per tensor:
//	Offer{id, tag, plan, flags, name} ──────▶  (a range of the region is set aside)
//	                                  ◀────── Grant{id, remote offset} | Refuse{id, why}
//	   (chunks are posted; WRITE WITH IMM names tag and chunk)
//	Sum{id, CRC32C} ────────────────────────▶  (when the sender has checksummed the tensor)
//	End{id, tag, error} ────────────────────▶  (sent once the engine fenced the transfer)
//	                                  ◀────── Receipt{id, error}  (CRC checked)
//	                                  ◀────── Cancel{id, why}     (the receiver gives up)
//	Bye ◀──────────────────────────────────▶ Bye
//
// A tensor is handed to the receiving application only after End, so no
// abandoned work request of it can land afterwards (see Receiver.AwaitSender).
//
// Over verbs the channel carries the verbs connection's own frames too
// (ResetPath, ResetAck: a path's fence) for the session's lifetime; a
// bootstrap.Mux routes them to the connection and the application frames
// to the session's reader.
//
// The tensor's CRC32C travels in a Sum of its own, after the Offer, before
// or after End, so that the sender checksums the tensor while its chunks
// are already on their way rather than before it may offer it (End goes
// out as soon as the engine fenced the transfer: its slot may be reused at
// once). Offer's flag offerChecked says that a Sum will follow; the
// receiver then checksums the chunks as they land and delivers the tensor
// once it has both End and Sum. Version 1 carried the CRC32C in Offer.
const (
	sessionVersion = 2

	msgHello   = bootstrap.TypeApp + iota // sender → receiver
	msgWelcome                            // receiver → sender
	msgOffer                              // sender → receiver
	msgGrant                              // receiver → sender
	msgRefuse                             // receiver → sender
	msgEnd                                // sender → receiver
	msgReceipt                            // receiver → sender
	msgCancel                             // receiver → sender
	msgBye                                // either way
	msgNoVerbs                            // either way, during a verbs set-up (auto): use TCP
	msgSum                                // sender → receiver
)

// Offer flags.
const (
	// offerChecked: the sender checksums the tensor; a Sum carries its
	// CRC32C.
	offerChecked = 1 << 0
)

// Transport bits in Hello.
const (
	transportTCP   = 1 << 0
	transportVerbs = 1 << 1
)

// errShort is returned by the decoder for a truncated message.
var errShort = errors.New("mptx: truncated control message")

type hello struct {
	Version    uint16
	Transports uint8 // bit set of transport*
	Paths      uint16
	MaxTensor  uint64 // informational: the largest tensor the sender will offer
}

type welcome struct {
	Transport  uint8  // the one chosen: transportTCP or transportVerbs
	DataAddr   string // tcp: the data listener's host:port
	RegionSize uint64
}

type offerMsg struct {
	ID        uint64
	Tag       uint16
	Size      uint64
	ChunkSize uint64
	Count     uint32
	Flags     uint32 // offer* bits
	Name      string
	Trace     string // W3C traceparent of the sender's transfer span, "" if none
}

type grantMsg struct {
	ID     uint64
	Remote uint64
}

// idMsg is Refuse, End, Receipt and Cancel: an id, for End a tag, and an
// error text ("" for success).
type idMsg struct {
	ID  uint64
	Tag uint16 // End only
	Err string
}

// sumMsg is Sum: the CRC32C of a tensor whose Offer had offerChecked.
type sumMsg struct {
	ID     uint64
	CRC32C uint32
}

// MaxNameLen bounds a tensor's name (bytes).
const MaxNameLen = 4096

type wenc struct{ b []byte }

func (e *wenc) u8(v uint8)   { e.b = append(e.b, v) }
func (e *wenc) u16(v uint16) { e.b = binary.BigEndian.AppendUint16(e.b, v) }
func (e *wenc) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *wenc) u64(v uint64) { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *wenc) str(s string) {
	if len(s) > 1<<16-1 {
		s = s[:1<<16-1]
	}
	e.u16(uint16(len(s)))
	e.b = append(e.b, s...)
}

type wdec struct {
	b   []byte
	err error
}

func (d *wdec) need(n int) []byte {
	if d.err != nil || len(d.b) < n {
		d.err = errShort
		return make([]byte, n)
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}
func (d *wdec) u8() uint8   { return d.need(1)[0] }
func (d *wdec) u16() uint16 { return binary.BigEndian.Uint16(d.need(2)) }
func (d *wdec) u32() uint32 { return binary.BigEndian.Uint32(d.need(4)) }
func (d *wdec) u64() uint64 { return binary.BigEndian.Uint64(d.need(8)) }
func (d *wdec) str() string {
	n := int(d.u16())
	if d.err != nil || len(d.b) < n {
		d.err = errShort
		return ""
	}
	return string(d.need(n))
}
func (d *wdec) done(what string) error {
	if d.err != nil {
		return fmt.Errorf("mptx: %s: %w", what, d.err)
	}
	if len(d.b) != 0 {
		return fmt.Errorf("mptx: %s: %d trailing bytes", what, len(d.b))
	}
	return nil
}

func (m *hello) marshal() []byte {
	var e wenc
	e.u16(m.Version)
	e.u8(m.Transports)
	e.u16(m.Paths)
	e.u64(m.MaxTensor)
	return e.b
}

func (m *hello) unmarshal(b []byte) error {
	d := wdec{b: b}
	m.Version, m.Transports, m.Paths, m.MaxTensor = d.u16(), d.u8(), d.u16(), d.u64()
	return d.done("Hello")
}

func (m *welcome) marshal() []byte {
	var e wenc
	e.u8(m.Transport)
	e.str(m.DataAddr)
	e.u64(m.RegionSize)
	return e.b
}

func (m *welcome) unmarshal(b []byte) error {
	d := wdec{b: b}
	m.Transport, m.DataAddr, m.RegionSize = d.u8(), d.str(), d.u64()
	if err := d.done("Welcome"); err != nil {
		return err
	}
	if m.Transport != transportTCP && m.Transport != transportVerbs {
		return fmt.Errorf("mptx: Welcome: transport %d (valid: %d tcp, %d verbs)", m.Transport, transportTCP, transportVerbs)
	}
	if m.RegionSize > uint64(units.MaxBytes) {
		return fmt.Errorf("mptx: Welcome: region size %d (valid: up to %d)", m.RegionSize, units.MaxBytes)
	}
	return nil
}

func (m *offerMsg) marshal() []byte {
	var e wenc
	e.u64(m.ID)
	e.u16(m.Tag)
	e.u64(m.Size)
	e.u64(m.ChunkSize)
	e.u32(m.Count)
	e.u32(m.Flags)
	e.str(m.Name)
	e.str(m.Trace)
	return e.b
}

// plan returns the offer's chunk plan, checked as chunk.NewPlan would make
// it.
func (m *offerMsg) plan() (chunk.Plan, error) {
	p := chunk.Plan{Size: units.Bytes(m.Size), ChunkSize: units.Bytes(m.ChunkSize), Count: int(m.Count)}
	if m.Size == 0 || m.Size > uint64(units.MaxBytes) || m.ChunkSize == 0 || m.ChunkSize > uint64(chunk.MaxSize) ||
		m.Count == 0 || m.Count > chunk.MaxChunks || (m.Size-1)/m.ChunkSize+1 != uint64(m.Count) {
		return chunk.Plan{}, fmt.Errorf("mptx: Offer %d: plan of %d B in %d chunks of %d B is not a valid chunk plan", m.ID, m.Size, m.Count, m.ChunkSize)
	}
	return p, nil
}

func (m *offerMsg) unmarshal(b []byte) error {
	d := wdec{b: b}
	m.ID, m.Tag, m.Size, m.ChunkSize, m.Count, m.Flags = d.u64(), d.u16(), d.u64(), d.u64(), d.u32(), d.u32()
	m.Name, m.Trace = d.str(), d.str()
	if err := d.done("Offer"); err != nil {
		return err
	}
	if int(m.Tag) >= chunk.MaxTags {
		return fmt.Errorf("mptx: Offer %d: tag %d (valid: 0..%d)", m.ID, m.Tag, chunk.MaxTags-1)
	}
	if len(m.Name) > MaxNameLen {
		return fmt.Errorf("mptx: Offer %d: name of %d bytes (valid: up to %d)", m.ID, len(m.Name), MaxNameLen)
	}
	_, err := m.plan()
	return err
}

func (m *grantMsg) marshal() []byte {
	var e wenc
	e.u64(m.ID)
	e.u64(m.Remote)
	return e.b
}

func (m *grantMsg) unmarshal(b []byte) error {
	d := wdec{b: b}
	m.ID, m.Remote = d.u64(), d.u64()
	if err := d.done("Grant"); err != nil {
		return err
	}
	if m.Remote > uint64(units.MaxBytes) {
		return fmt.Errorf("mptx: Grant %d: remote offset %d (valid: up to %d)", m.ID, m.Remote, units.MaxBytes)
	}
	return nil
}

func (m *idMsg) marshal() []byte {
	var e wenc
	e.u64(m.ID)
	e.u16(m.Tag)
	e.str(m.Err)
	return e.b
}

func (m *idMsg) unmarshal(b []byte, what string) error {
	d := wdec{b: b}
	m.ID, m.Tag, m.Err = d.u64(), d.u16(), d.str()
	return d.done(what)
}

func (m *sumMsg) marshal() []byte {
	var e wenc
	e.u64(m.ID)
	e.u32(m.CRC32C)
	return e.b
}

func (m *sumMsg) unmarshal(b []byte) error {
	d := wdec{b: b}
	m.ID, m.CRC32C = d.u64(), d.u32()
	return d.done("Sum")
}

// remoteError is an error text the peer sent.
type remoteError string

func (e remoteError) Error() string { return string(e) }

// errText returns err's text for the wire, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	if s := err.Error(); s != "" {
		return s
	}
	return "error"
}

// textErr turns a wire error text back into an error, nil for "".
func textErr(s string) error {
	if s == "" {
		return nil
	}
	return remoteError(s)
}
