package multipath_test

import (
	"testing"
	"time"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/multipath/enginetest"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

func TestExplorePrio(t *testing.T) {
	for _, cc := range []string{"dcqcn", "fixed", "swift"} {
		for _, prio := range []multipath.Priority{0, 4} {
			rates := []units.BitRate{100 * gbps, 100 * gbps, 100 * gbps, 100 * gbps}
			idle := enginetest.New(t, multipath.Config{CC: cc}, rates, 10*time.Microsecond)
			idle.SubmitSpec(multipath.TransferSpec{ID: 2, Size: 2 * units.MiB, Priority: prio})
			idle.Run(2)
			tIdle := idle.Done[2].At.Sub(vtime.Epoch)
			n := enginetest.New(t, multipath.Config{CC: cc}, rates, 10*time.Microsecond)
			n.Submit(1, units.GiB, 0)
			n.RunUntil(at(3100 * time.Microsecond))
			t0 := n.Now
			n.SubmitSpec(multipath.TransferSpec{ID: 2, Size: 2 * units.MiB, Priority: prio})
			n.Run(2)
			tBusy := n.Done[2].At.Sub(t0)
			t.Logf("%s prio %d: idle %v busy %v ratio %.3f", cc, prio, tIdle, tBusy, float64(tBusy)/float64(tIdle))
		}
	}
}
