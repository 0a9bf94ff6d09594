//go:build unix

package mptx_test

import (
	"syscall"
	"time"
)

// cpuTime returns the process's CPU time so far, user and system
// (getrusage(2), RUSAGE_SELF): every thread, the kernel's work for its
// system calls included, so both ends of a loopback benchmark count.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
