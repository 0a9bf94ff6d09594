package pacing_test

import (
	"fmt"

	"github.com/mptx-dev/mptx/pacing"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// Example posts one 1 MiB chunk in 128 KiB segments on a 100 Gb/s path
// behind a 100 Gb/s port, the way an engine's event loop would: post what
// both buckets allow, otherwise sleep until the later NextSend.
func Example() {
	path, err := pacing.New(pacing.Config{Rate: 100 * units.Gbps})
	if err != nil {
		panic(err)
	}
	port, err := pacing.NewPort(pacing.PortConfig{LineRate: 100 * units.Gbps})
	if err != nil {
		panic(err)
	}
	fmt.Printf("burst %v (XOFF %v), segment %v\n", path.Burst(), path.PFCXoff(), path.Segment())

	const chunkLen = 1 * units.MiB
	now := vtime.Epoch
	for off := units.Bytes(0); off < chunkLen; off += path.Segment() {
		n := min(path.Segment(), chunkLen-off)
		if at := max(path.NextSend(now, n), port.NextSend(now, n)); at > now {
			now = at // the driver's timer fires here
		}
		path.OnSent(now, n)
		port.OnSent(now, n)
		fmt.Printf("t=%v post [%v, +%v)\n", now.Sub(vtime.Epoch), off, n)
	}
	// Output:
	// burst 512KiB (XOFF 1MiB), segment 128KiB
	// t=0s post [0B, +128KiB)
	// t=0s post [128KiB, +128KiB)
	// t=0s post [256KiB, +128KiB)
	// t=0s post [384KiB, +128KiB)
	// t=10.486µs post [512KiB, +128KiB)
	// t=20.972µs post [640KiB, +128KiB)
	// t=31.458µs post [768KiB, +128KiB)
	// t=41.944µs post [896KiB, +128KiB)
}
