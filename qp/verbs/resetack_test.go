package verbs

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
)

// frame is one control frame a fake control channel delivers.
type frame struct {
	t bootstrap.Type
	m any
}

// TestAwaitResetAck: Reset waits for the ResetAck of its own reset. The
// late answer of a reset that timed out (an earlier Seq, across the 2^32
// wrap too) is dropped, not taken for this one's: that would declare the
// path fenced before the receiver reset its end for this reset. A
// Receipt on the way is kept; an answer from the future or another frame
// is a protocol error; the channel's error is returned as it is.
func TestAwaitResetAck(t *testing.T) {
	ack := func(seq uint32) frame {
		return frame{bootstrap.TypeResetAck, &bootstrap.ResetAck{Path: 2, Seq: seq, OK: true, PSN: seq}}
	}
	receipt := frame{bootstrap.TypeReceipt, &Receipt{ID: 7}}
	closed := errors.New("control channel closed")
	for _, c := range []struct {
		name     string
		seq      uint32
		frames   []frame
		wantPSN  uint32 // of the ack returned (its Seq, in this test)
		wantErr  string // substring; "" for success
		receipts int
	}{
		{"own ack", 5, []frame{ack(5)}, 5, "", 0},
		{"stale acks dropped", 5, []frame{ack(3), ack(4), ack(5)}, 5, "", 0},
		{"stale across the wrap", 1, []frame{ack(0xffffffff), ack(0), ack(1)}, 1, "", 0},
		{"receipt kept", 5, []frame{ack(4), receipt, ack(5)}, 5, "", 1},
		{"ack from the future", 5, []frame{ack(6)}, 0, "ResetAck of reset 6 while waiting for that of reset 5", 0},
		{"other frame", 5, []frame{{bootstrap.TypeTransfer, &bootstrap.Transfer{}}}, 0, "while waiting for ResetAck", 0},
		{"only stale acks, then the channel ends", 5, []frame{ack(4)}, 0, closed.Error(), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			i := 0
			recv := func(ctx context.Context) (bootstrap.Type, any, error) {
				if i == len(c.frames) {
					return 0, nil, closed
				}
				f := c.frames[i]
				i++
				return f.t, f.m, nil
			}
			n := 0
			got, err := awaitResetAck(context.Background(), recv, c.seq, func(r *Receipt) {
				if r.ID != 7 {
					t.Errorf("receipt %+v, want the Receipt delivered", r)
				}
				n++
			})
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("awaitResetAck = %v", err)
			case c.wantErr == "" && (got.Seq != c.seq || got.PSN != c.wantPSN):
				t.Fatalf("awaitResetAck = %+v, want the ack of reset %d", got, c.seq)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("awaitResetAck = %+v, %v; want an error containing %q", got, err, c.wantErr)
			case c.wantErr != "" && err != closed && !errors.Is(err, bootstrap.ErrProtocol):
				t.Fatalf("awaitResetAck error %v does not wrap bootstrap.ErrProtocol", err)
			}
			if n != c.receipts {
				t.Errorf("%d receipts kept, want %d", n, c.receipts)
			}
		})
	}
}
