package mptx

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

// Access is a set of rights on an exposed range: AccessRead lets the peer
// Read it, AccessWrite lets it Write it.
type Access = qp.Access

// Access rights of a Descriptor (IBV_ACCESS_REMOTE_READ / _WRITE,
// ibv_reg_mr(3)).
const (
	AccessRead  = qp.AccessRead
	AccessWrite = qp.AccessWrite
)

// Descriptor names a range of memory a session's accepting end exposed
// (Region.Expose) to its peer, and what the peer may do with it: what the
// dialing end needs to Read or Write the range, one-sided. It is the
// session's counterpart of a NIXL descriptor or a verbs (address, length,
// rkey) triple, and a capability: the accepting end's backend checks every
// request against the key's range and rights (the NIC on verbs, the
// responder on TCP), so a peer cannot reach outside it, whatever
// descriptor it forges, and a revoked descriptor reaches nothing.
//
// A Descriptor is a small value; MarshalBinary (about 20 bytes) and
// MarshalText (a "mptx-desc:" token) encode it for the application's own
// metadata channel, or Session.SendDescriptor carries it on the session's.
// It is valid on the session it was exposed on, until revoked or the
// session ends.
type Descriptor struct {
	// Key names the exposure (qp.Exposure.Key); never 0.
	Key uint32
	// Addr is the range's first byte in the key's address space.
	Addr uint64
	// Len is the range's length; > 0.
	Len units.Bytes
	// Access is what the peer may do: AccessRead, AccessWrite or both.
	Access Access
	// PathKeys, when set, are the range's key on each path of the
	// session, in path order (verbs registers an exposure with each NIC,
	// and each registration has its own rkey; Key is path 0's); nil: Key
	// on every path.
	PathKeys []uint32
}

// Equal reports whether d and e name the same range with the same keys
// and rights.
func (d Descriptor) Equal(e Descriptor) bool {
	if d.Key != e.Key || d.Addr != e.Addr || d.Len != e.Len || d.Access != e.Access || len(d.PathKeys) != len(e.PathKeys) {
		return false
	}
	for i, k := range d.PathKeys {
		if e.PathKeys[i] != k {
			return false
		}
	}
	return true
}

// Descriptor encoding, version 1 (all integers big endian or unsigned
// varints, encoding/binary):
//
//	magic 'm' | version 1 | access | key u32 | addr uvarint | len uvarint
//	[ n uvarint (1..MaxDescriptorPaths) | n × path key u32 ]
//
// The path keys are there only when the descriptor has them. Varints must
// be minimal, and nothing may follow, so that every valid descriptor has
// exactly one encoding.
const (
	descMagic   = 'm'
	descVersion = 1
	// MaxDescriptorPaths bounds Descriptor.PathKeys (multipath.MaxPaths).
	MaxDescriptorPaths = 64
	// MaxDescriptorLen is the longest binary encoding of a Descriptor.
	MaxDescriptorLen = 3 + 4 + 2*binary.MaxVarintLen64 + 1 + 4*MaxDescriptorPaths
	descText         = "mptx-desc:"
)

// errDescriptor wraps every descriptor decoding error.
var errDescriptor = errors.New("mptx: bad descriptor")

// check validates d's fields.
func (d Descriptor) check() error {
	switch {
	case d.Key == 0:
		return fmt.Errorf("%w: key 0 (valid: a key Region.Expose returned)", errDescriptor)
	case d.Access == 0 || d.Access&^qp.AccessMask != 0:
		return fmt.Errorf("%w: access %#x (valid: AccessRead, AccessWrite or both)", errDescriptor, uint8(d.Access))
	case d.Len <= 0:
		return fmt.Errorf("%w: length %d (valid: > 0)", errDescriptor, int64(d.Len))
	case d.Addr > uint64(units.MaxBytes) || uint64(d.Len) > uint64(units.MaxBytes)-d.Addr:
		return fmt.Errorf("%w: range [%#x, +%d) ends past %#x (the largest address)", errDescriptor, d.Addr, int64(d.Len), uint64(units.MaxBytes))
	case d.PathKeys != nil && (len(d.PathKeys) == 0 || len(d.PathKeys) > MaxDescriptorPaths):
		return fmt.Errorf("%w: %d path keys (valid: none, or 1..%d)", errDescriptor, len(d.PathKeys), MaxDescriptorPaths)
	}
	for i, k := range d.PathKeys {
		if k == 0 {
			return fmt.Errorf("%w: path key %d is 0", errDescriptor, i)
		}
	}
	return nil
}

// AppendBinary appends d's encoding to b (encoding.BinaryAppender).
func (d Descriptor) AppendBinary(b []byte) ([]byte, error) {
	if err := d.check(); err != nil {
		return b, err
	}
	b = append(b, descMagic, descVersion, byte(d.Access))
	b = binary.BigEndian.AppendUint32(b, d.Key)
	b = binary.AppendUvarint(b, d.Addr)
	b = binary.AppendUvarint(b, uint64(d.Len))
	if len(d.PathKeys) > 0 {
		b = binary.AppendUvarint(b, uint64(len(d.PathKeys)))
		for _, k := range d.PathKeys {
			b = binary.BigEndian.AppendUint32(b, k)
		}
	}
	return b, nil
}

// MarshalBinary encodes d (at most MaxDescriptorLen bytes).
func (d Descriptor) MarshalBinary() ([]byte, error) {
	return d.AppendBinary(make([]byte, 0, MaxDescriptorLen))
}

// UnmarshalBinary decodes a descriptor MarshalBinary encoded. It refuses
// anything else: another magic or version, unknown rights, key 0, an
// empty range or one ending past units.MaxBytes, non-minimal varints,
// trailing bytes.
func (d *Descriptor) UnmarshalBinary(b []byte) error {
	if len(b) < 7 {
		return fmt.Errorf("%w: %d bytes (valid: 9 to %d)", errDescriptor, len(b), MaxDescriptorLen)
	}
	if b[0] != descMagic || b[1] != descVersion {
		return fmt.Errorf("%w: header %#02x %#02x (valid: %#02x %#02x)", errDescriptor, b[0], b[1], descMagic, descVersion)
	}
	v := Descriptor{Access: Access(b[2]), Key: binary.BigEndian.Uint32(b[3:7])}
	rest := b[7:]
	addr, rest, err := uvarint(rest, "address")
	if err != nil {
		return err
	}
	n, rest, err := uvarint(rest, "length")
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		k, r, err := uvarint(rest, "path key count")
		if err != nil {
			return err
		}
		if k == 0 || k > MaxDescriptorPaths || uint64(len(r)) != 4*k {
			return fmt.Errorf("%w: %d path keys in %d bytes (valid: 1..%d keys of 4 bytes, nothing after)", errDescriptor, k, len(r), MaxDescriptorPaths)
		}
		v.PathKeys = make([]uint32, k)
		for i := range v.PathKeys {
			v.PathKeys[i] = binary.BigEndian.Uint32(r[4*i:])
		}
	}
	if n > uint64(units.MaxBytes) {
		return fmt.Errorf("%w: length %d (valid: up to %d)", errDescriptor, n, int64(units.MaxBytes))
	}
	v.Addr, v.Len = addr, units.Bytes(n)
	if err := v.check(); err != nil {
		return err
	}
	*d = v
	return nil
}

// uvarint reads one minimal unsigned varint.
func uvarint(b []byte, what string) (uint64, []byte, error) {
	v, k := binary.Uvarint(b)
	if k <= 0 {
		return 0, nil, fmt.Errorf("%w: %s: truncated or overlong varint", errDescriptor, what)
	}
	var tmp [binary.MaxVarintLen64]byte
	if binary.PutUvarint(tmp[:], v) != k {
		return 0, nil, fmt.Errorf("%w: %s: non-minimal varint", errDescriptor, what)
	}
	return v, b[k:], nil
}

// MarshalText encodes d as "mptx-desc:" and its binary encoding in
// unpadded URL-safe base64 (about 38 characters): a token for JSON, a
// command line or an HTTP header.
func (d Descriptor) MarshalText() ([]byte, error) {
	var raw [MaxDescriptorLen]byte
	b, err := d.AppendBinary(raw[:0])
	if err != nil {
		return nil, err
	}
	out := make([]byte, len(descText)+base64.RawURLEncoding.EncodedLen(len(b)))
	copy(out, descText)
	base64.RawURLEncoding.Encode(out[len(descText):], b)
	return out, nil
}

// UnmarshalText decodes a token MarshalText made.
func (d *Descriptor) UnmarshalText(text []byte) error {
	s, ok := strings.CutPrefix(string(text), descText)
	if !ok {
		return fmt.Errorf("%w: text does not start with %q", errDescriptor, descText)
	}
	if base64.RawURLEncoding.DecodedLen(len(s)) > MaxDescriptorLen {
		return fmt.Errorf("%w: token of %d characters (valid: up to %d)", errDescriptor, len(s), base64.RawURLEncoding.EncodedLen(MaxDescriptorLen))
	}
	// encoding/base64 skips '\r' and '\n' even in strict mode: a token
	// is one word, so anything outside the URL-safe alphabet is refused
	// (FuzzDescriptor: "mptx-desc:bQEB0\n0000010" decoded as if the
	// newline were not there).
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("%w: character %q at offset %d of the token (valid: A-Z a-z 0-9 - _)", errDescriptor, c, len(descText)+i)
		}
	}
	var raw [MaxDescriptorLen]byte
	n, err := base64.RawURLEncoding.Strict().Decode(raw[:], []byte(s))
	if err != nil {
		return fmt.Errorf("%w: %v", errDescriptor, err)
	}
	return d.UnmarshalBinary(raw[:n])
}

// String describes d for people; MarshalText is the token to pass on.
func (d Descriptor) String() string {
	if len(d.PathKeys) > 0 {
		return fmt.Sprintf("key %#x [%#x, +%v) %v, path keys %#x", d.Key, d.Addr, d.Len, d.Access, d.PathKeys)
	}
	return fmt.Sprintf("key %#x [%#x, +%v) %v", d.Key, d.Addr, d.Len, d.Access)
}

// pathKey returns the key to post on path with.
func (d *Descriptor) pathKey(path int) uint32 {
	if path >= 0 && path < len(d.PathKeys) {
		return d.PathKeys[path]
	}
	return d.Key
}

// Slice returns the descriptor of n bytes of d from offset off: the same
// key and rights, a narrower range (to Read or Write one block of a larger
// exposure). Narrowing is the requester's arithmetic, not a new right: the
// responder still checks only the exposure's own range; to scope a peer's
// access, expose the narrower range (Region.Expose).
func (d Descriptor) Slice(off, n units.Bytes) (Descriptor, error) {
	if off < 0 || n <= 0 || off > d.Len || n > d.Len-off {
		return Descriptor{}, fmt.Errorf("mptx: Descriptor.Slice(%d, %d) of a %d-byte range (valid: 0 <= off, 0 < n, off+n <= %d)", int64(off), int64(n), int64(d.Len), int64(d.Len))
	}
	d.Addr += uint64(off)
	d.Len = n
	return d, nil
}
