package sim_test

import (
	"fmt"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/sim/simqp"
	"github.com/mptx-dev/mptx/sim/topo"
	"github.com/mptx-dev/mptx/units"
)

// Example builds a two-tier fabric, connects two hosts with four QPs (four
// ECMP paths) and sends one 4 MiB WRITE WITH IMM on each, polling the
// completions from inside the simulation through a driver.
func Example() {
	w := sim.NewWorld(1)
	tp, err := topo.LeafSpine(w, topo.LeafSpineConfig{Leaves: 2, Spines: 4, HostsPerLeaf: 2})
	if err != nil {
		panic(err)
	}
	conn, recv, err := simqp.Connect(tp.Net, tp.Hosts[0], tp.Hosts[3], simqp.Options{QPs: 4})
	if err != nil {
		panic(err)
	}
	for p := range conn.Paths() {
		off := units.Bytes(p) * 4 * units.MiB
		wr := []qp.SendWR{{ID: uint64(p), Op: qp.OpWriteImm, Local: off, Remote: off, Len: 4 * units.MiB, Imm: uint32(p)}}
		if _, err := conn.PostSend(p, wr); err != nil {
			panic(err)
		}
	}
	var got int
	buf := make([]qp.Completion, 8)
	d := simqp.Drive(w, stepFunc(func() {
		n, _ := conn.Poll(buf)
		got += n
	}))
	conn.SetNotify(d.Notify)
	w.Run()
	n, _ := recv.Poll(buf)
	fmt.Printf("%d send and %d receive completions; last at %v\n", got, n, w.Now())
	// Output: 4 send and 4 receive completions; last at 2.06296356ms
}
