package tcp

import (
	"io"
	"net"

	"github.com/mptx-dev/mptx/internal/crc32c"

	"github.com/mptx-dev/mptx/qp"
)

// Checksums next to the copies (ListenConfig.Checksum,
// DialConfig.Checksum; see Checksums in the package doc).

// readSummed reads len(dst) payload bytes into dst and returns their
// CRC32C, computed a sumPiece at a time right after each piece was read,
// while the bytes are in the cache (ListenConfig.Checksum).
func (p *recvPath) readSummed(dst []byte) (uint32, error) {
	var sum uint32
	for len(dst) > 0 {
		b := dst[:min(len(dst), sumPiece)]
		if _, err := io.ReadFull(p.br, b); err != nil {
			return 0, err
		}
		sum = crc32c.Update(sum, b)
		dst = dst[len(b):]
	}
	return sum, nil
}

// writeSummed writes the batch iov of k WRs (p.batch holds their send
// queue slots) as writeLoop does, and stores the CRC32C of each OpWrite's
// and OpWriteImm's payload in p.sums (DialConfig.Checksum): all but the
// last sumTail bytes of a payload go out a piece of at most sumPiece at a
// time, each checksummed right after its write (the kernel's copy has
// just read it into the cache); the tail is checksummed just before its
// write, which it shares with the WRs after it, so that each sum is
// stored before the receiver can have the WR's last byte. The tail is
// short because a checksum that reads memory first pays for the cache
// misses the kernel's copy would otherwise take. Headers and short
// payloads are gathered into one writev as before.
func (p *sendPath) writeSummed(conn *net.TCPConn, iov [][]byte, k int) error {
	out := p.out[:0]
	flush := func() error {
		if len(out) == 0 {
			return nil
		}
		p.bufs = out
		_, err := p.bufs.WriteTo(conn)
		out = p.out[:0]
		return err
	}
	v := 0 // the next entry of iov
	for i := 0; i < k; i++ {
		j := p.batch[i]
		wr := &p.sq[j]
		out = append(out, iov[v]) // the header
		v++
		if wr.Len == 0 || wr.Op == qp.OpRead {
			if wr.Op != qp.OpRead {
				p.sums[j].Store(0) // the CRC32C of nothing
			}
			continue
		}
		pay := iov[v]
		v++
		var sum uint32
		for len(pay) > sumTail {
			b := pay[:min(sumPiece, len(pay)-sumTail)]
			out = append(out, b)
			if err := flush(); err != nil {
				return err
			}
			sum = crc32c.Update(sum, b)
			pay = pay[len(b):]
		}
		p.sums[j].Store(crc32c.Update(sum, pay))
		out = append(out, pay)
	}
	return flush()
}
