// Package leak checks that a test leaves no qp/tcp goroutine behind
// (wireguard-go's goroutineLeakCheck, narrowed to one package so that the
// runtime's and the testing package's goroutines do not count).
package leak

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"
)

// pkgFrame marks a goroutine running code of package mptx/qp/tcp.
const pkgFrame = "mptx/qp/tcp."

// Check registers a cleanup that fails t if any goroutine is still running
// code of package mptx/qp/tcp once t's other cleanups (which close
// everything the test opened) have run. Call it first in a test, so that its
// cleanup runs last. A goroutine that has signalled its WaitGroup may still
// be returning, so Check waits up to 5 s for such goroutines to finish before
// printing their stacks.
func Check(t testing.TB) {
	t.Helper()
	t.Cleanup(func() {
		var left []string
		for wait := time.Millisecond; ; wait *= 2 {
			left = find()
			if len(left) == 0 {
				return
			}
			if wait > 4*time.Second {
				break
			}
			time.Sleep(wait)
		}
		t.Errorf("%d qp/tcp goroutines leaked:\n%s", len(left), strings.Join(left, "\n\n"))
	})
}

// Count returns the number of goroutines running qp/tcp code now.
func Count() int { return len(find()) }

func find() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var left []string
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte(pkgFrame)) {
			left = append(left, string(g))
		}
	}
	return left
}
