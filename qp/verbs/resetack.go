package verbs

import (
	"context"
	"fmt"

	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
)

// awaitResetAck reads control frames with recv until the ResetAck of the
// reset numbered seq, and returns it. A ResetAck of an earlier reset (one
// that timed out: its answer came after the caller gave up) is dropped:
// taken for this reset's, it would declare the path fenced before the
// receiver has reset its end for it, and the old incarnation's packets
// still in the network could land after the transfer was reported. A
// ResetAck numbered later than seq is a protocol error, as is a frame of
// any other type but a Receipt (the receiver may finish meanwhile), which
// goes to receipt.
func awaitResetAck(ctx context.Context, recv func(context.Context) (bootstrap.Type, any, error), seq uint32, receipt func(*Receipt)) (*bootstrap.ResetAck, error) {
	for {
		t, m, err := recv(ctx)
		if err != nil {
			return nil, err
		}
		switch t {
		case bootstrap.TypeResetAck:
			ack := m.(*bootstrap.ResetAck)
			switch d := int32(seq - ack.Seq); {
			case d == 0:
				return ack, nil
			case d < 0:
				return nil, fmt.Errorf("%w: ResetAck of reset %d while waiting for that of reset %d", bootstrap.ErrProtocol, ack.Seq, seq)
			}
			// a late answer to an earlier reset
		case bootstrap.TypeReceipt:
			receipt(m.(*Receipt))
		default:
			return nil, fmt.Errorf("%w: %s while waiting for ResetAck", bootstrap.ErrProtocol, t)
		}
	}
}
