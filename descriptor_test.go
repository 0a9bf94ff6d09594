package mptx

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/mptx-dev/mptx/units"
)

func TestDescriptorRoundTrip(t *testing.T) {
	for _, d := range []Descriptor{
		{Key: 1, Addr: 0, Len: 1, Access: AccessRead},
		{Key: 0xdeadbeef, Addr: 0x7f12_3456_7000, Len: 2 * units.GiB, Access: AccessRead | AccessWrite},
		{Key: 7, Addr: uint64(units.MaxBytes) - 1, Len: 1, Access: AccessWrite},
		{Key: 0x1000, Addr: 0x7f00_0000_0000, Len: units.MiB, Access: AccessRead, PathKeys: []uint32{0x1000, 0x2000, 0x1001, 0x2001}},
	} {
		b, err := d.MarshalBinary()
		if err != nil {
			t.Fatalf("MarshalBinary(%v): %v", d, err)
		}
		if len(b) > MaxDescriptorLen {
			t.Errorf("MarshalBinary(%v) is %d bytes, over MaxDescriptorLen %d", d, len(b), MaxDescriptorLen)
		}
		var got Descriptor
		if err := got.UnmarshalBinary(b); err != nil || !got.Equal(d) {
			t.Errorf("UnmarshalBinary(MarshalBinary(%v)) = %v, %v", d, got, err)
		}
		txt, err := d.MarshalText()
		if err != nil {
			t.Fatalf("MarshalText(%v): %v", d, err)
		}
		got = Descriptor{}
		if err := got.UnmarshalText(txt); err != nil || !got.Equal(d) {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", txt, got, err, d)
		}
	}
	// A typical KV-cache exposure: a user-space address, 1 GiB.
	d := Descriptor{Key: 0x1234abcd, Addr: 0x7f00_0000_0000, Len: units.GiB, Access: AccessRead}
	b, _ := d.MarshalBinary()
	txt, _ := d.MarshalText()
	t.Logf("%v: %d bytes binary, %d characters as text (%s)", d, len(b), len(txt), txt)
	if len(b) > 20 {
		t.Errorf("a 1 GiB exposure at a user-space address encodes in %d bytes; want it compact (<= 20)", len(b))
	}
}

func TestDescriptorRejects(t *testing.T) {
	good, _ := Descriptor{Key: 3, Addr: 4096, Len: 100, Access: AccessRead}.MarshalBinary()
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for name, b := range map[string][]byte{
		"empty":         nil,
		"short":         good[:6],
		"magic":         mut(func(b []byte) []byte { b[0] = 'x'; return b }),
		"version":       mut(func(b []byte) []byte { b[1] = 2; return b }),
		"no access":     mut(func(b []byte) []byte { b[2] = 0; return b }),
		"unknown right": mut(func(b []byte) []byte { b[2] = 4 | 1; return b }),
		"key 0":         mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[3:], 0); return b }),
		"trailing":      append(append([]byte(nil), good...), 0),
		"truncated len": good[:len(good)-1],
		"overlong addr": append(append(append([]byte(nil), good[:7]...), 0x80|0x00, 0x20, 0x00), good[9:]...),
		"zero len":      append(append([]byte(nil), good[:len(good)-1]...), 0),
		"no path keys":  append(append([]byte(nil), good...), 0),
		"path key 0":    append(append([]byte(nil), good...), 1, 0, 0, 0, 0),
		"short keys":    append(append([]byte(nil), good...), 2, 0, 0, 0, 1),
		"past max": func() []byte {
			b := append([]byte(nil), good[:7]...)
			b = binary.AppendUvarint(b, uint64(units.MaxBytes))
			return binary.AppendUvarint(b, 2)
		}(),
		"huge len": func() []byte {
			b := append([]byte(nil), good[:7]...)
			b = binary.AppendUvarint(b, 0)
			return binary.AppendUvarint(b, 1<<63)
		}(),
	} {
		var d Descriptor
		if err := d.UnmarshalBinary(b); !errors.Is(err, errDescriptor) {
			t.Errorf("%s: UnmarshalBinary(%x) = %v (%v); want a bad-descriptor error", name, b, err, d)
		}
	}
	var d Descriptor
	txt, _ := Descriptor{Key: 3, Addr: 4096, Len: 100, Access: AccessRead}.MarshalText()
	if err := d.UnmarshalText(txt); err != nil {
		t.Fatalf("UnmarshalText(%q) = %v", txt, err)
	}
	for _, s := range []string{"", "mptx-desc:", "mptx-desc:!!!", "nope:" + string(good), "mptx-desc:" + string(bytes.Repeat([]byte("A"), 100)),
		// encoding/base64 skips newlines even in strict mode
		string(txt[:15]) + "\n" + string(txt[15:]), string(txt) + "\n", string(txt[:15]) + "\r" + string(txt[15:])} {
		if err := d.UnmarshalText([]byte(s)); err == nil {
			t.Errorf("UnmarshalText(%q) = nil; want an error", s)
		}
	}
	if _, err := (Descriptor{Key: 1, Len: 0, Access: AccessRead}).MarshalBinary(); err == nil {
		t.Errorf("MarshalBinary of an empty range = nil error")
	}
}

func TestDescriptorSlice(t *testing.T) {
	d := Descriptor{Key: 9, Addr: 1 << 40, Len: 1 << 20, Access: AccessRead}
	s, err := d.Slice(4096, 8192)
	if err != nil || s.Addr != 1<<40+4096 || s.Len != 8192 || s.Key != 9 || s.Access != AccessRead {
		t.Errorf("Slice(4096, 8192) = %v, %v", s, err)
	}
	if _, err := d.Slice(1<<20-10, 11); err == nil {
		t.Errorf("Slice past the end = nil error")
	}
	if _, err := d.Slice(0, 0); err == nil {
		t.Errorf("Slice of 0 bytes = nil error")
	}
	if _, err := d.Slice(-1, 1); err == nil {
		t.Errorf("Slice at -1 = nil error")
	}
}

// FuzzDescriptor feeds arbitrary bytes to the descriptor decoders: none
// may panic; every accepted descriptor is valid (nonzero key, known
// rights, a nonempty range ending by units.MaxBytes), re-encodes to the
// very same bytes (one encoding per descriptor), and round-trips through
// the text form.
func FuzzDescriptor(f *testing.F) {
	for _, d := range []Descriptor{
		{Key: 1, Addr: 0, Len: 1, Access: AccessRead},
		{Key: 0x1234abcd, Addr: 0x7f00_0000_0000, Len: units.GiB, Access: AccessRead | AccessWrite},
		{Key: 0xffffffff, Addr: uint64(units.MaxBytes) - 4096, Len: 4096, Access: AccessWrite},
		{Key: 5, Addr: 4096, Len: 4096, Access: AccessRead, PathKeys: []uint32{5, 6}},
	} {
		b, _ := d.MarshalBinary()
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte("mptx-desc:bQEBEjSrzYCAgICA_AeAgICABA"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Descriptor
		if err := d.UnmarshalBinary(b); err == nil {
			if err := d.check(); err != nil {
				t.Fatalf("accepted an invalid descriptor %v: %v", d, err)
			}
			again, err := d.MarshalBinary()
			if err != nil || !bytes.Equal(again, b) {
				t.Fatalf("descriptor %v re-encodes to %x, %v; decoded from %x", d, again, err, b)
			}
			txt, err := d.MarshalText()
			var e Descriptor
			if err != nil || e.UnmarshalText(txt) != nil || !e.Equal(d) {
				t.Fatalf("text round trip of %v: %q -> %v", d, txt, e)
			}
		}
		var e Descriptor
		if err := e.UnmarshalText(b); err == nil {
			if err := e.check(); err != nil {
				t.Fatalf("accepted an invalid descriptor %v from text: %v", e, err)
			}
			again, _ := e.MarshalText()
			if !bytes.Equal(again, b) {
				t.Fatalf("text descriptor %q re-encodes to %q", b, again)
			}
		}
	})
}
