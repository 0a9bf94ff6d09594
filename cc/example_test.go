package cc_test

import (
	"fmt"
	"time"

	"github.com/mptx-dev/mptx/cc"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// A driver builds one algorithm per path through the registry, feeds it
// events stamped with its own clock, and arms one timer at Deadline.
func ExampleNew() {
	path := cc.PathInfo{LineRate: 100 * units.Gbps, BaseRTT: 10 * time.Microsecond}
	alg, err := cc.New("dcqcn", cc.Params{"profile": "paper", "rate_increase_timer": "55us"}, path)
	if err != nil {
		fmt.Println(err)
		return
	}
	now := vtime.Time(time.Millisecond)
	fmt.Println("start:", alg.Rate(), "deadline:", alg.Deadline())

	alg.OnCNP(cc.CNP{Now: now, Count: 1}) // Rc ← Rc(1 − α/2) with α = 1
	fmt.Println("after a CNP:", alg.Rate(), "deadline:", alg.Deadline())

	alg.OnTimer(alg.Deadline()) // the rate-increase timer: fast recovery
	fmt.Println("after the timer:", alg.Rate())

	_, err = cc.New("dcqcn", cc.Params{"g": "2"}, path)
	fmt.Println(err)
	// Output:
	// start: 100Gbps deadline: unset
	// after a CNP: 50Gbps deadline: 1.055ms
	// after the timer: 75Gbps
	// cc: dcqcn: parameter g = "2": want a number, 0 < g < 1
}

// HPCC needs per-hop telemetry on every ACK; without it (real RoCE NICs)
// it holds its window.
func ExampleNewHPCC() {
	path := cc.PathInfo{LineRate: 100 * units.Gbps, BaseRTT: 10 * time.Microsecond}
	h, err := cc.NewHPCC(cc.HPCCConfig{}, path)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("W_init:", h.Window(), h.Rate())

	hop := func(t time.Duration, tx units.Bytes) cc.Ack {
		a := cc.Ack{Now: vtime.Time(t), Acked: 4096, NHops: 1}
		a.Hops[0] = cc.INTHop{TxBytes: tx, TS: vtime.Time(t), Rate: 100 * units.Gbps}
		return a
	}
	h.OnAck(hop(100*time.Microsecond, 0))
	h.OnAck(hop(110*time.Microsecond, 250000)) // 200 Gb/s offered to a 100 Gb/s port: U = 2
	fmt.Printf("U = %.2f, W = %v\n", h.U(), h.Window())
	// Output:
	// W_init: 125000B 100Gbps
	// U = 2.00, W = 59425B
}
