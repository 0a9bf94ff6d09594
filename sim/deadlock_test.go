package sim_test

import (
	"testing"

	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/sim/simqp"
	"github.com/mptx-dev/mptx/units"
)

// ring builds the classic cyclic-buffer-dependency fabric (Hu et al.,
// "Deadlocks in Datacenter Networks: Why Do They Form, and How to Avoid
// Them", HotNets'16): three switches A, B, C in a ring, one host on each,
// and routes that send every flow two hops clockwise — hA→hC via B,
// hB→hA via C, hC→hB via A — so each ring link carries one flow's first
// hop and another's second hop, and the ring's three egress queues each
// wait on the next one's ingress buffer.
func ring(t *testing.T, wd sim.WatchdogConfig, size units.Bytes) (*sim.World, *sim.Network, []*bulk, []*sim.Port) {
	t.Helper()
	w := sim.NewWorld(13)
	net := sim.NewNetwork(w)
	link := sim.LinkConfig{Rate: 100 * units.Gbps, Delay: sim.Microsecond}
	var sw [3]*sim.Switch
	var hosts [3]*sim.Host
	for i := range sw {
		var err error
		sw[i], err = net.AddSwitch(string(rune('A'+i)), sim.SwitchConfig{Buffer: 2 * units.MiB})
		mustT(t, err)
		hosts[i], err = net.AddHost("h"+string(rune('A'+i)), 1, sim.NICConfig{AckTimeout: 10})
		mustT(t, err)
		_, err = net.Link(hosts[i].NIC(0), sw[i], link)
		mustT(t, err)
	}
	for i := range sw {
		_, err := net.Link(sw[i], sw[(i+1)%3], link)
		mustT(t, err)
	}
	mustT(t, net.SetWatchdog(wd))
	mustT(t, net.Build())
	cw := func(i int) *sim.Port { // clockwise egress of switch i
		for _, p := range sw[i].Ports() {
			if p.Remote().Switch() == sw[(i+1)%3] {
				return p
			}
		}
		panic("no clockwise port")
	}
	// Flows i → i+2 go clockwise through i+1 (the shortest route is the
	// direct counter-clockwise cable).
	for i := range sw {
		dst := hosts[(i+2)%3].NIC(0)
		sw[i].SetRoute(dst, cw(i))
		sw[(i+1)%3].SetRoute(dst, cw((i+1)%3))
	}
	var bs []*bulk
	for i := range sw {
		c, _, err := simqp.Connect(net, hosts[i], hosts[(i+2)%3], simqp.Options{QPs: 1})
		mustT(t, err)
		b := newBulk(w, c, size, units.MiB, 8)
		d := simqp.Drive(w, b)
		c.SetNotify(d.Notify)
		bs = append(bs, b)
	}
	return w, net, bs, []*sim.Port{cw(0), cw(1), cw(2)}
}

// TestDeadlock: the ring deadlocks — every clockwise port stays paused
// and no byte is delivered — and the PFC watchdog reports each of the
// three ports of the cycle once they have been paused for its threshold.
func TestDeadlock(t *testing.T) {
	const th = 500 * sim.Microsecond
	w, net, bs, cyc := ring(t, sim.WatchdogConfig{Threshold: th}, 64*units.MiB)
	w.RunUntil(5 * sim.Millisecond)
	var before []units.Bytes
	for _, b := range bs {
		before = append(before, b.done)
	}
	w.RunUntil(20 * sim.Millisecond)
	for i, b := range bs {
		if b.done != before[i] || b.done == 64*units.MiB {
			t.Errorf("flow %d progressed from %v to %v between 5 and 20 ms: no deadlock", i, before[i], b.done)
		}
	}
	for _, p := range cyc {
		if !p.Paused() {
			t.Errorf("cycle port %s is not paused at 20 ms", p.Name())
		}
		var rep *sim.PauseStorm
		for i := range net.Storms() {
			if net.Storms()[i].Port == p {
				rep = &net.Storms()[i]
			}
		}
		if rep == nil {
			t.Errorf("watchdog did not report cycle port %s", p.Name())
			continue
		}
		t.Logf("watchdog: %s paused since %v, reported at %v", p.Name(), rep.Since, rep.Detected)
		if rep.Detected-rep.Since != th {
			t.Errorf("%s reported %v after its pause began, want the threshold %v", p.Name(), rep.Detected-rep.Since, th)
		}
		if c := p.Counters(); c.WatchdogTriggers != 1 || c.PausedTime < 19*sim.Millisecond {
			t.Errorf("%s: %d watchdog triggers, paused %v; want 1 and nearly all of the run", p.Name(), c.WatchdogTriggers, c.PausedTime)
		}
	}
}

// TestDeadlockRecovery: with recovery on, the watchdog breaks each
// deadlock by dropping the stuck port's lossless packets (SONiC pfcwd
// "drop"); go-back-N resends them and all three flows finish.
func TestDeadlockRecovery(t *testing.T) {
	const th = 500 * sim.Microsecond
	size := 64 * units.MiB
	if testing.Short() || raceEnabled {
		size = 16 * units.MiB
	}
	w, net, bs, cyc := ring(t, sim.WatchdogConfig{Threshold: th, Recover: true, Restore: th}, size)
	w.RunUntil(2 * sim.Second)
	var drops uint64
	for _, p := range cyc {
		drops += p.Counters().WatchdogDrops
	}
	for i, b := range bs {
		if b.done != size {
			t.Errorf("flow %d delivered %v of %v with watchdog recovery", i, b.done, size)
		}
	}
	t.Logf("%d watchdog reports, %d packets dropped by recovery; flows done at %v %v %v",
		len(net.Storms()), drops, bs[0].doneAt, bs[1].doneAt, bs[2].doneAt)
	if drops == 0 {
		t.Error("recovery dropped nothing")
	}
}
