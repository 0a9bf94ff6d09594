package mptx

import (
	"github.com/mptx-dev/mptx/internal/crc32c"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/tcp"
	"github.com/mptx-dev/mptx/units"
)

// The sender's checksum over TCP. A checked tensor sent from the caller's
// memory over qp/tcp (a send region of its own) is not read a second time
// for its CRC32C: the connection is dialed with tcp.DialConfig.Checksum,
// so each path's writer checksums every payload in pieces next to the
// kernel's copy of it (while the bytes are in the core's cache) and
// reports the sum in the WR's completion. sumConn, the driver's view of
// the connection, notes which chunk each posted write carries and keeps
// the sums of the successful ones; when the engine fences the transfer
// (every chunk acknowledged) the session combines them (crc32c.Combine)
// into the tensor's CRC32C and sends the Sum, just before the End. A chunk
// with no sum (a write that did not carry exactly one chunk) is checksummed
// from memory then. On a loaded 2-core host this took the sender's CRC32C
// from a pass over cold memory to one over cached bytes
// (BenchmarkTCPLoopback; docs/design.md, Performance).

// sumConn is the sending driver's view of a qp/tcp connection dialed with
// Checksum: it is the connection (embedded, so the driver finds its
// SendRegions, Resetter and Notifier) with PostSend and Poll watched.
// Loop goroutine only, as the driver's calls are.
type sumConn struct {
	*tcp.Conn
	ss *sendSide
	// posted holds the writes of fused transfers, by WR ID (unique among
	// outstanding WRs: the engine's work slots), until their completion.
	posted map[uint64]postedWR
}

// postedWR is what a write carries: Len bytes at Local of send region
// Region.
type postedWR struct {
	region       uint32
	local, bytes units.Bytes
}

// PostSend implements qp.Conn: it notes the writes of fused transfers.
func (c *sumConn) PostSend(path int, wrs []qp.SendWR) (int, error) {
	n, err := c.Conn.PostSend(path, wrs)
	for i := range wrs[:n] {
		wr := &wrs[i]
		if (wr.Op == qp.OpWrite || wr.Op == qp.OpWriteImm) && wr.RKey == 0 && wr.Region != 0 && c.ss.byRegion[wr.Region] != nil {
			c.posted[wr.ID] = postedWR{region: wr.Region, local: wr.Local, bytes: wr.Len}
		}
	}
	return n, err
}

// Poll implements qp.Conn: a successful write of a fused transfer that
// carried exactly one chunk gives that chunk its sum.
func (c *sumConn) Poll(dst []qp.Completion) (int, error) {
	n, err := c.Conn.Poll(dst)
	if len(c.posted) == 0 {
		return n, err
	}
	for i := range dst[:n] {
		cqe := &dst[i]
		w, ok := c.posted[cqe.ID]
		if !ok {
			continue
		}
		delete(c.posted, cqe.ID)
		t := c.ss.byRegion[w.region]
		if t == nil || cqe.Status != qp.StatusOK || !cqe.HasSum || w.local < t.off {
			continue
		}
		local := w.local - t.off
		k := int(local / t.plan.ChunkSize)
		if k >= t.plan.Count {
			continue
		}
		if off, size := t.plan.Span(k); off == local && size == w.bytes {
			t.sums[k], t.have[k] = cqe.Sum, true
		}
	}
	return n, err
}

// fusedSum returns a fused transfer's CRC32C: its chunks' sums combined
// in order, checksumming from memory any chunk that has none. Loop
// goroutine, before t's bytes are unpinned.
func (ss *sendSide) fusedSum(t *Transfer) uint32 {
	var crc uint32
	for k := range t.plan.Count {
		off, size := t.plan.Span(k)
		if !t.have[k] {
			if testHookSumFromMemory != nil {
				testHookSumFromMemory(k)
			}
			t.sums[k], t.have[k] = crc32c.Checksum(t.data[off:off+size]), true
		}
		crc = crc32c.Combine(crc, t.sums[k], uint64(size))
	}
	return crc
}

// testHookSumFromMemory, set by tests only, sees each chunk of a fused
// transfer that fusedSum checksums from memory (no write's sum).
var testHookSumFromMemory func(chunk int)
