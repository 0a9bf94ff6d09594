package simqp_test

import (
	"testing"

	"github.com/mptx-dev/mptx/qp/qptest"
	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/sim/simqp"
	"github.com/mptx-dev/mptx/sim/topo"
	"github.com/mptx-dev/mptx/units"
)

// TestConformance runs the qp backend conformance suite against the
// simulator. Every path gets its own rail (NIC, leaf and cable), so that
// failing a path's cable breaks that path only; a short ACK timeout makes
// the failure visible within a millisecond of virtual time.
func TestConformance(t *testing.T) {
	qptest.Run(t, func(tb testing.TB, paths int, region units.Bytes) *qptest.Env {
		w := sim.NewWorld(42)
		tp, err := topo.MultiRail(w, topo.MultiRailConfig{
			Common: topo.Common{NIC: sim.NICConfig{AckTimeout: 4, RetryCount: 2}},
			Hosts:  2, Rails: paths, HostsPerLeaf: 2, Spines: 1,
		})
		if err != nil {
			tb.Fatal(err)
		}
		c, r, err := simqp.Connect(tp.Net, tp.Hosts[0], tp.Hosts[1], simqp.Options{QPs: paths, Region: region})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { c.Close(); r.Close() })
		return &qptest.Env{
			Conn:     c,
			Recv:     r,
			Progress: func() { w.Step() },
			Fail: func(path int) error {
				tp.Hosts[0].NIC(path).Port().Cable().SetDown(w.Now())
				return nil
			},
		}
	})
}
