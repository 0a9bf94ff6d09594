//go:build !amd64 && !arm64

package sim

import "unsafe"

// prefetch is a no-op where the simulator has no prefetch instruction.
func prefetch(p unsafe.Pointer) {}

func prefetch2(p, q unsafe.Pointer) {}
