package verbs_test

import (
	"context"
	"log"
	"time"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/verbs"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// Example shows a sender: open the NICs, take a buffer from the registered
// pool, dial the receiver with two QPs per NIC, post one chunk as a WRITE
// WITH IMM and poll its completion. (mptx.Sender drives all of this for
// real transfers; the receiving side is Host.Listen and Listener.Accept.)
func Example() {
	h, err := verbs.OpenHost(verbs.HostConfig{Devices: []string{"mlx5_0", "mlx5_1"}, PoolSize: 256 * units.MiB})
	if err != nil {
		log.Fatal(err) // wraps qp.ErrNotSupported where there is no device
	}
	defer h.Close()
	buf, err := h.Alloc(64 * units.MiB)
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Free()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := h.Dial(ctx, "10.0.0.2:7471", verbs.DialConfig{
		Secret: []byte("a shared secret of 16+ bytes"), Send: buf, QPsPerNIC: 2, Clock: vtime.NewMonotonic(),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	wr := []qp.SendWR{{ID: 1, Op: qp.OpWriteImm, Local: 0, Remote: 0, Len: 4 * units.MiB, Imm: 0}}
	if _, err := conn.PostSend(0, wr); err != nil {
		log.Fatal(err)
	}
	done := make([]qp.Completion, 16)
	for n := 0; n == 0; {
		if n, err = conn.Poll(done); err != nil {
			log.Fatal(err)
		}
	}
}
