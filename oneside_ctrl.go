package mptx

import (
	"fmt"

	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
)

// One-sided access adds two messages to the session protocol (ctrl.go),
// both from the accepting end, which exposes memory, to the dialing end,
// which reads and writes it:
//
//	acceptor                                  dialer
//	Descriptor{name, descriptor} ───────────▶  (Session.RecvDescriptor returns it)
//	Revoke{key, addr, len} ─────────────────▶  (Reads and Writes of that range fail at once)
//
// Neither is needed for a Read or a Write: a descriptor may reach the
// dialer through the application's own channel, and the accepting end's
// backend refuses a revoked key whether or not Revoke arrived. Revoke only
// lets the dialer fail such a request before it reaches a path. A peer
// that predates these messages ends the session on receiving one, so only
// applications that use one-sided access send them. They take frame types
// well above the push protocol's, so that neither renumbers the other.
const (
	msgDescriptor = bootstrap.TypeApp + 32 + iota // acceptor → dialer
	msgRevoke                                     // acceptor → dialer
)

// descMsg is Descriptor: a name the application chose (up to MaxNameLen
// bytes) and the descriptor's binary encoding (u16 length, bytes).
type descMsg struct {
	Name string
	Desc Descriptor
}

func (m *descMsg) marshal() ([]byte, error) {
	var raw [MaxDescriptorLen]byte
	d, err := m.Desc.AppendBinary(raw[:0])
	if err != nil {
		return nil, err
	}
	var e wenc
	e.str(m.Name)
	e.u16(uint16(len(d)))
	e.b = append(e.b, d...)
	return e.b, nil
}

func (m *descMsg) unmarshal(b []byte) error {
	d := wdec{b: b}
	m.Name = d.str()
	n := int(d.u16())
	if n > MaxDescriptorLen {
		return fmt.Errorf("mptx: Descriptor %q: %d bytes of descriptor (valid: up to %d)", m.Name, n, MaxDescriptorLen)
	}
	raw := d.need(n)
	if err := d.done("Descriptor"); err != nil {
		return err
	}
	if len(m.Name) > MaxNameLen {
		return fmt.Errorf("mptx: Descriptor: name of %d bytes (valid: up to %d)", len(m.Name), MaxNameLen)
	}
	if err := m.Desc.UnmarshalBinary(raw); err != nil {
		return fmt.Errorf("mptx: Descriptor %q: %w", m.Name, err)
	}
	return nil
}

// revokeMsg is Revoke: the exposure the acceptor revoked, its key and
// range (a backend may hand the key out again for another range later).
type revokeMsg struct {
	Key  uint32
	Addr uint64
	Len  uint64
}

func (m *revokeMsg) marshal() []byte {
	var e wenc
	e.u32(m.Key)
	e.u64(m.Addr)
	e.u64(m.Len)
	return e.b
}

func (m *revokeMsg) unmarshal(b []byte) error {
	d := wdec{b: b}
	m.Key, m.Addr, m.Len = d.u32(), d.u64(), d.u64()
	if err := d.done("Revoke"); err != nil {
		return err
	}
	if m.Key == 0 {
		return fmt.Errorf("mptx: Revoke: key 0 (valid: a key the acceptor exposed)")
	}
	return nil
}

// onCtrlOr handles the one-sided messages and hands every other frame to
// handle, the side's own handler (readLoop).
func (s *Session) onCtrlOr(handle func(bootstrap.Type, []byte) error, t bootstrap.Type, payload []byte) error {
	switch t {
	case msgDescriptor:
		var m descMsg
		if err := m.unmarshal(payload); err != nil {
			return err
		}
		if s.snd == nil {
			return fmt.Errorf("mptx: the dialer sent a Descriptor (only the accepting end exposes memory)")
		}
		s.os.received(m)
		return nil
	case msgRevoke:
		var m revokeMsg
		if err := m.unmarshal(payload); err != nil {
			return err
		}
		if s.snd == nil {
			return fmt.Errorf("mptx: the dialer sent a Revoke (only the accepting end exposes memory)")
		}
		s.os.revoke(m)
		return nil
	}
	return handle(t, payload)
}
