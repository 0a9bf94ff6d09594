//go:build !linux

package tcp

import (
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/mptx-dev/mptx/qp"
)

// bindToDevice is not available off Linux: a non-empty iface fails the dial.
func bindToDevice(iface string) func(network, address string, c syscall.RawConn) error {
	if iface == "" {
		return nil
	}
	return func(string, string, syscall.RawConn) error {
		return fmt.Errorf("tcp: binding to interface %q: %w (SO_BINDTODEVICE is Linux-only; use PathConfig.Local)", iface, qp.ErrNotSupported)
	}
}

// setUserTimeout is a no-op off Linux (TCP_USER_TIMEOUT is Linux-only); the
// kernel's own retransmission limits apply.
func setUserTimeout(*net.TCPConn, time.Duration) error { return nil }

// tcpInfo reports nothing off Linux.
func tcpInfo(*net.TCPConn) (rtt time.Duration, mss int, retrans uint64, err error) {
	return 0, 0, 0, nil
}
