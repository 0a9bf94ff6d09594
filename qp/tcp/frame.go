package tcp

import (
	"encoding/binary"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

// Frame layout; see the package doc.
const (
	hdrLen = 24 // data frame header, bytes
	ackLen = 8  // acknowledgement frame, bytes

	opWrite    byte = 1
	opWriteImm byte = 2

	typeACK byte = 0x81
	typeNAK byte = 0x82

	// synRemoteAccess is the NAK syndrome for a remote access error (IBA's
	// NAK code 2).
	synRemoteAccess byte = 2
)

// MaxMessageBytes is the largest payload of one work request.
const MaxMessageBytes = units.GiB

// header is a decoded data frame header.
type header struct {
	op     byte
	flags  byte
	seq    uint32
	remote uint64
	length uint32
	imm    uint32
}

func putHeader(b *[hdrLen]byte, wr *qp.SendWR, seq uint32) {
	op := opWrite
	imm := uint32(0)
	if wr.Op == qp.OpWriteImm {
		op, imm = opWriteImm, wr.Imm
	}
	b[0], b[1], b[2], b[3] = op, 0, 0, 0
	binary.BigEndian.PutUint32(b[4:], seq)
	binary.BigEndian.PutUint64(b[8:], uint64(wr.Remote))
	binary.BigEndian.PutUint32(b[16:], uint32(wr.Len))
	binary.BigEndian.PutUint32(b[20:], imm)
}

func parseHeader(b []byte) header {
	_ = b[hdrLen-1]
	return header{
		op:     b[0],
		flags:  b[1] | b[2] | b[3], // reserved bytes must be zero too
		seq:    binary.BigEndian.Uint32(b[4:]),
		remote: binary.BigEndian.Uint64(b[8:]),
		length: binary.BigEndian.Uint32(b[16:]),
		imm:    binary.BigEndian.Uint32(b[20:]),
	}
}

func putAck(b *[ackLen]byte, typ, syndrome byte, seq uint32) {
	b[0], b[1], b[2], b[3] = typ, syndrome, 0, 0
	binary.BigEndian.PutUint32(b[4:], seq)
}
