package mptx

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/units"
)

// TransferStats describe a finished (or running) transfer.
type TransferStats struct {
	Bytes     units.Bytes   // tensor size
	Acked     units.Bytes   // bytes acknowledged so far (all chunks done: Bytes)
	PathBytes []units.Bytes // bytes of this tensor each path carried (retries included)
	Requeues  int           // chunk attempts moved off a failed or stalled path
	Started   time.Time
	Duration  time.Duration // Send to the receiver's receipt
}

// Transfer is one tensor being sent; SendAsync returns it. Its methods are
// safe for concurrent use.
type Transfer struct {
	ID   multipath.TransferID
	Name string
	Size units.Bytes
	// Priority is the tensor's class (SendOptions.Priority).
	Priority multipath.Priority

	s      *sendSide
	buf    *Buffer // the pool Buffer sent in place (nil: staged or registered)
	ctx    context.Context
	stop   func() bool
	off    units.Bytes // staging range, when staged
	staged bool
	region uint32 // the caller's data registered as a send region (qp.SendRegions); 0 if staged
	tag    int
	plan   chunk.Plan
	fenced bool // the engine reported it: nothing posted reads its bytes any more
	// The checksum, computed while the chunks are on their way (see
	// SendAsync) and sent in a Sum. Loop goroutine only: summing says
	// the caller's goroutine is still computing it (the bytes stay
	// pinned until it is done).
	checked bool
	summing bool
	// fused: the checksum is the connection's (sumConn): sums[i] is
	// chunk i's CRC32C as qp/tcp's writer sent it (have[i]), data the
	// tensor, for a chunk without one. Loop goroutine only.
	fused bool
	sums  []uint32
	have  []bool
	data  []byte

	acked    atomic.Int64
	mu       sync.Mutex
	paths    []units.Bytes
	requeues int
	started  time.Time
	took     time.Duration
	err      error
	done     chan struct{}
	once     sync.Once
}

// Done is closed when the transfer has ended; Err then says how.
func (t *Transfer) Done() <-chan struct{} { return t.done }

// Err returns nil while the transfer runs or when it succeeded, else why
// it failed.
func (t *Transfer) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// Wait blocks until the transfer ends and returns Err; if ctx ends first it
// returns ctx's error and the transfer goes on (cancel it through the
// context given to SendAsync).
func (t *Transfer) Wait(ctx context.Context) error {
	select {
	case <-t.done:
		return t.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Progress returns the bytes acknowledged by the receiver's NIC (or TCP
// stack) so far and the tensor size.
func (t *Transfer) Progress() (acked, total units.Bytes) {
	return units.Bytes(t.acked.Load()), t.Size
}

// Stats returns the transfer's statistics.
func (t *Transfer) Stats() TransferStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return TransferStats{Bytes: t.Size, Acked: units.Bytes(t.acked.Load()), PathBytes: append([]units.Bytes(nil), t.paths...),
		Requeues: t.requeues, Started: t.started, Duration: t.took}
}

func (t *Transfer) finish(err error) {
	t.once.Do(func() {
		t.mu.Lock()
		t.err = err
		t.took = time.Since(t.started)
		t.mu.Unlock()
		if t.stop != nil {
			t.stop()
		}
		close(t.done)
	})
}
