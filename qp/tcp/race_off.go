//go:build !race

package tcp

// raceEnabled reports whether the race detector is on; see
// Receiver.regionLock.
const raceEnabled = false

func raceSend() {}
func raceRecv() {}
