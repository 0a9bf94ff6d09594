//go:build race

package tcp

import (
	"runtime"
	"unsafe"
)

// raceEnabled reports whether the race detector is on; see
// Receiver.regionLock.
const raceEnabled = true

// wire stands for the network in race builds. A frame sent on one side and
// read on the other is a happens-before edge the race detector cannot see
// (it goes through the kernel), so a test that runs both ends in one process
// (read the region, post a write, the peer's reader writes the region)
// would be reported as a race. Every send releases wire and every receive
// acquires it, which models that causality (over-approximately: a receive is
// ordered after every earlier send in the process). Separate processes do
// not share it, and normal builds compile it away.
var wire byte

func raceSend() { runtime.RaceReleaseMerge(unsafe.Pointer(&wire)) }
func raceRecv() { runtime.RaceAcquire(unsafe.Pointer(&wire)) }
