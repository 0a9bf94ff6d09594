package mptx

import (
	"bytes"
	"testing"

	"github.com/mptx-dev/mptx/units"
)

// FuzzOneSidedMessages feeds arbitrary payloads to the one-sided control
// message decoders (Descriptor, Revoke): none may panic, and every
// accepted message is valid and re-encodes to the same bytes.
func FuzzOneSidedMessages(f *testing.F) {
	d := descMsg{Name: "req-17/layer3", Desc: Descriptor{Key: 0xabc, Addr: 0x7f00_0000_1000, Len: 2 * units.MiB, Access: AccessRead}}
	b, _ := d.marshal()
	f.Add(false, b)
	f.Add(false, []byte{0, 0, 0})
	f.Add(true, (&revokeMsg{Key: 0xabc, Addr: 0x7f00_0000_1000, Len: 1 << 21}).marshal())
	f.Add(true, []byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, revoke bool, b []byte) {
		if revoke {
			var m revokeMsg
			if m.unmarshal(b) == nil && (m.Key == 0 || !bytes.Equal(m.marshal(), b)) {
				t.Fatalf("Revoke %+v accepted from %x", m, b)
			}
			return
		}
		var m descMsg
		if m.unmarshal(b) == nil {
			again, err := m.marshal()
			if err != nil || !bytes.Equal(again, b) || m.Desc.check() != nil || len(m.Name) > MaxNameLen {
				t.Fatalf("Descriptor message %+v accepted from %x (re-encodes to %x, %v)", m, b, again, err)
			}
		}
	})
}
