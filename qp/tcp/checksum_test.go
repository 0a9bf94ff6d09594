package tcp_test

import (
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/tcp"
	"github.com/mptx-dev/mptx/units"
)

// TestChecksumCompletions: with ListenConfig.Checksum every WRITE WITH
// IMM into the region completes with the CRC32C of the payload it
// carried (HasSum) and where it landed (SumAt), whatever its length relative to the reader's pieces
// and buffer (0, less than the read buffer, several pieces, not a
// multiple of a piece); a keyed WRITE WITH IMM (into an exposed range)
// has none. With DialConfig.Checksum every write's send completion has
// its payload's CRC32C (keyed or not, WRITE or WRITE WITH IMM), a READ's
// none. Without Checksum no completion has one.
func TestChecksumCompletions(t *testing.T) {
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	sizes := []units.Bytes{0, 1, 17, 16 << 10, 100_000, 256 << 10, 600_001, units.MiB + 3}
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("checksum=%v", on), func(t *testing.T) {
			const region = 8 * units.MiB
			p := newPair(t, region, pairOpts{paths: make([]tcp.PathConfig, 2), checksum: on})
			fill(p.send, 0x5c)
			// Below the plain writes, which fill the region from its end.
			exp, err := p.recv.Expose(p.recv.Region()[4096:8192], qp.AccessWrite)
			if err != nil {
				t.Fatal(err)
			}
			w := newWaiter(t, p)
			var wrs []qp.SendWR
			want := map[uint32]uint32{}        // imm → CRC32C of the payload
			wantSend := map[uint64]uint32{}    // WR ID → CRC32C of the payload
			wantAt := map[uint32]units.Bytes{} // imm → where the payload lands
			off := units.Bytes(0)
			for i, n := range sizes {
				wr := qp.SendWR{ID: uint64(i), Op: qp.OpWriteImm, Local: off, Remote: region - off - n, Len: n, Imm: uint32(i)}
				want[wr.Imm] = crc32.Checksum(p.send[wr.Local:wr.Local+n], castagnoli)
				wantAt[wr.Imm] = wr.Remote
				wantSend[wr.ID] = want[wr.Imm]
				wrs = append(wrs, wr)
				if i%2 == 1 { // and a plain WRITE of the same bytes
					wr.ID, wr.Op, wr.Imm = uint64(100+i), qp.OpWrite, 0
					wantSend[wr.ID] = want[uint32(i)]
					wrs = append(wrs, wr)
				}
				off += n
			}
			// A keyed WRITE WITH IMM: checksummed by nobody on arrival.
			const keyedImm = 1000
			wrs = append(wrs, qp.SendWR{ID: 1000, Op: qp.OpWriteImm, Local: 0, Remote: units.Bytes(exp.Addr), Len: 100, Imm: keyedImm, RKey: exp.Key})
			wantSend[1000] = crc32.Checksum(p.send[:100], castagnoli)
			// A READ (its bytes land at the end of the send region,
			// which no write sends): no sum.
			rexp, err := p.recv.Expose(p.recv.Region()[:4096], qp.AccessRead)
			if err != nil {
				t.Fatal(err)
			}
			const readID = 2000
			wrs = append(wrs, qp.SendWR{ID: readID, Op: qp.OpRead, Local: region - 64, Remote: units.Bytes(rexp.Addr), Len: 64, RKey: rexp.Key})
			imms := 0
			for _, wr := range wrs {
				if wr.Op == qp.OpWriteImm {
					imms++
				}
			}
			for path := range 2 {
				// Each path's keyed write and READ get memory of their
				// own: the two paths' receivers run at once.
				batch := append([]qp.SendWR(nil), wrs...)
				for i := range batch {
					switch batch[i].ID {
					case 1000:
						batch[i].Remote += units.Bytes(path) * 2048
					case readID:
						batch[i].Local -= units.Bytes(path) * 64
					}
				}
				for len(batch) > 0 {
					k, err := p.conn.PostSend(path, batch)
					if err != nil && !errors.Is(err, qp.ErrQueueFull) {
						t.Fatalf("PostSend: %v", err)
					}
					batch = batch[k:]
					if len(batch) > 0 {
						w.drain()
						p.progress(w.timer)
					}
				}
			}
			w.until("all completions", func() bool { return len(w.recv) == 2*imms && len(w.send) == 2*len(wrs) })
			for _, c := range w.send {
				switch {
				case c.Status != qp.StatusOK:
					t.Fatalf("send completion %+v: want success", c)
				case !on || c.ID == readID:
					if c.HasSum || c.Sum != 0 {
						t.Errorf("send completion %+v (checksum %v): has a sum, want none", c, on)
					}
				case !c.HasSum || c.Sum != wantSend[c.ID]:
					t.Errorf("send completion of WR %d (%d bytes): sum %#08x (HasSum %v), want %#08x", c.ID, c.Bytes, c.Sum, c.HasSum, wantSend[c.ID])
				}
			}
			for _, c := range w.recv {
				if c.Status != qp.StatusOK || c.Op != qp.OpRecvImm {
					t.Fatalf("receive completion %+v: want a successful RECV_RDMA_WITH_IMM", c)
				}
				switch {
				case c.Imm == keyedImm || !on:
					if c.HasSum || c.Sum != 0 {
						t.Errorf("completion %+v (checksum %v): has a sum, want none", c, on)
					}
				case !c.HasSum || c.Sum != want[c.Imm] || c.SumAt != wantAt[c.Imm]:
					t.Errorf("completion of imm %d (%d bytes): sum %#08x at %d (HasSum %v), want %#08x at %d", c.Imm, c.Bytes, c.Sum, c.SumAt, c.HasSum, want[c.Imm], wantAt[c.Imm])
				}
			}
		})
	}
}
