package cc

import (
	"testing"
	"time"

	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// BenchmarkOnAck measures one OnAck through the Algorithm interface, with
// varying RTT samples and two hops of advancing INT stamps (which only
// HPCC reads). DCQCN is first cut by a CNP so its timers are live.
func BenchmarkOnAck(b *testing.B) {
	for _, name := range Names() {
		b.Run(name, func(b *testing.B) {
			a := mustAlg(b, name, path100G)
			a.OnCNP(CNP{Now: us(1), Count: 1})
			ack := intAck(us(2), 4096, 64<<10, hop100(us(2), 0, 0), hop100(us(2), 0, 0))
			now := us(2)
			var tx units.Bytes
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				now += 330 // one 4 KiB packet at 100 Gb/s
				tx += 4096
				ack.Now = now
				ack.RTT = 10*time.Microsecond + time.Duration(i&15)*time.Microsecond
				ack.Hops[0].TS, ack.Hops[0].TxBytes, ack.Hops[0].QLen = now, tx, units.Bytes(i&7)*4096
				ack.Hops[1].TS, ack.Hops[1].TxBytes = now, tx
				a.OnAck(ack)
				sinkRate = a.Rate()
			}
		})
	}
}

// BenchmarkDCQCNPerPacket is the simulator's per-QP "NIC DCQCN" load: an
// OnSend per 4 KiB packet and a CNP every 50 µs, timers running.
func BenchmarkDCQCNPerPacket(b *testing.B) {
	d, err := NewDCQCN(DCQCNConfig{ByteCounter: 300000}, path100G)
	if err != nil {
		b.Fatal(err)
	}
	now := us(1)
	nextCNP := now
	b.ReportAllocs()
	for b.Loop() {
		now += 330
		if now >= nextCNP {
			d.OnCNP(CNP{Now: now, Count: 1})
			nextCNP = now + vtime.Time(50*time.Microsecond)
		}
		d.OnSend(Sent{Now: now, Bytes: 4096})
		sinkRate = d.Rate()
	}
}
