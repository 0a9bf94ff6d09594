package tcp

import (
	"encoding/binary"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

// Frame layout; see the package doc.
const (
	hdrLen  = 24              // data frame header, bytes
	keyLen  = 4               // the rkey that follows the header of a keyed frame
	hdrMax  = hdrLen + keyLen // the longest header
	ackLen  = 8               // acknowledgement frame, bytes
	respLen = ackLen + 4      // READ response header (an ACK and a length), bytes

	opWrite    byte = 1
	opWriteImm byte = 2
	// Keyed frames name a range the receiver exposed (qp.Exposer) by the
	// rkey after their header; remote is an address in the key's space.
	opRead        byte = 3 // RDMA READ request: length bytes at remote; no payload
	opWriteKey    byte = 4 // RDMA WRITE into an exposed range
	opWriteImmKey byte = 5 // RDMA WRITE WITH IMM into an exposed range

	typeACK      byte = 0x81
	typeNAK      byte = 0x82
	typeReadResp byte = 0x83 // READ response: the read's bytes; acknowledges up to its seq

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
	key    uint32 // keyed frames (set by the reader after the header)
}

// keyed reports whether frames of op carry an rkey after their header.
func keyed(op byte) bool { return op == opRead || op == opWriteKey || op == opWriteImmKey }

// validOp reports whether op is a data frame opcode.
func validOp(op byte) bool { return op >= opWrite && op <= opWriteImmKey }

// payload returns the payload bytes that follow h (a READ request has
// none: length is what it asks for).
func (h *header) payload() uint32 {
	if h.op == opRead {
		return 0
	}
	return h.length
}

// putHeader writes wr's frame header, with its key for a keyed frame, and
// returns its length.
func putHeader(b *[hdrMax]byte, wr *qp.SendWR, seq uint32) int {
	op := opWrite
	imm := uint32(0)
	switch {
	case wr.Op == qp.OpRead:
		op = opRead
	case wr.Op == qp.OpWriteImm && wr.RKey != 0:
		op, imm = opWriteImmKey, wr.Imm
	case wr.Op == qp.OpWriteImm:
		op, imm = opWriteImm, wr.Imm
	case wr.RKey != 0:
		op = opWriteKey
	}
	b[0], b[1], b[2], b[3] = op, 0, 0, 0
	binary.BigEndian.PutUint32(b[4:], seq)
	binary.BigEndian.PutUint64(b[8:], uint64(wr.Remote))
	binary.BigEndian.PutUint32(b[16:], uint32(wr.Len))
	binary.BigEndian.PutUint32(b[20:], imm)
	if !keyed(op) {
		return hdrLen
	}
	binary.BigEndian.PutUint32(b[hdrLen:], wr.RKey)
	return hdrMax
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

// putResp writes the header of a READ response to the request seq of
// length bytes.
func putResp(b *[respLen]byte, seq, length uint32) {
	b[0], b[1], b[2], b[3] = typeReadResp, 0, 0, 0
	binary.BigEndian.PutUint32(b[4:], seq)
	binary.BigEndian.PutUint32(b[8:], length)
}
