//go:build !unix

package mptx_test

import "time"

// cpuTime is unknown here: 0, and the benchmarks report no CPU time.
func cpuTime() time.Duration { return 0 }
