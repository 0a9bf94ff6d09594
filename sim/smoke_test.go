package sim_test

import (
	"testing"

	"mptx/qp"
	"mptx/sim"
	"mptx/sim/simqp"
	"mptx/sim/topo"
	"mptx/units"
)

func TestSmoke(t *testing.T) {
	w := sim.NewWorld(1)
	tp, err := topo.Star(w, topo.StarConfig{Hosts: 2})
	if err != nil {
		t.Fatal(err)
	}
	c, r, err := simqp.Connect(tp.Net, tp.Hosts[0], tp.Hosts[1], simqp.Options{QPs: 1})
	if err != nil {
		t.Fatal(err)
	}
	wrs := []qp.SendWR{{ID: 1, Op: qp.OpWrite, Len: units.MiB}, {ID: 2, Op: qp.OpWriteImm, Len: units.MiB, Imm: 7}}
	if n, err := c.PostSend(0, wrs); n != 2 || err != nil {
		t.Fatal(n, err)
	}
	w.Run()
	var cs [8]qp.Completion
	n, _ := c.Poll(cs[:])
	t.Logf("send completions %d: %+v", n, cs[:n])
	n, _ = r.Poll(cs[:])
	t.Logf("recv completions %d: %+v", n, cs[:n])
	t.Logf("now %v events %d", w.Now(), w.Events())
	t.Logf("qp %+v", c.QPs()[0].Counters())
}
