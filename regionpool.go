package mptx

import (
	"sync"

	"github.com/mptx-dev/mptx/units"
)

// regionPool keeps the receive regions of ended sessions for the next
// ones: making a region zeroes it, which takes seconds for a gigabyte when
// the Go heap recycles freed memory (a receiver serving senders one after
// another would pay that per session). A region is pooled only once no
// tensor of its session is outstanding (queued for Recv or not yet
// released), so no application ever sees its bytes overwritten; the bytes
// a region holds are never exposed beyond what lands for a new tensor. At
// most regionPoolMax regions of each size are kept.
var regionPool = struct {
	sync.Mutex
	free map[units.Bytes][][]byte
}{free: map[units.Bytes][][]byte{}}

const regionPoolMax = 2

func getRegion(size units.Bytes) []byte {
	regionPool.Lock()
	defer regionPool.Unlock()
	if l := regionPool.free[size]; len(l) > 0 {
		r := l[len(l)-1]
		regionPool.free[size] = l[:len(l)-1]
		return r
	}
	return nil
}

func putRegion(r []byte) {
	size := units.Bytes(len(r))
	regionPool.Lock()
	defer regionPool.Unlock()
	if len(regionPool.free[size]) < regionPoolMax {
		regionPool.free[size] = append(regionPool.free[size], r)
	}
}
