//go:build linux

package tcp

import (
	"fmt"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// bindToDevice returns a net.Dialer Control function that binds the socket
// to iface with SO_BINDTODEVICE (socket(7); needs CAP_NET_RAW), or nil when
// iface is empty.
func bindToDevice(iface string) func(network, address string, c syscall.RawConn) error {
	if iface == "" {
		return nil
	}
	return func(network, address string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.BindToDevice(int(fd), iface)
		}); err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("tcp: setsockopt(SO_BINDTODEVICE, %q): %w (no such interface, or CAP_NET_RAW missing?)", iface, serr)
		}
		return nil
	}
}

// setUserTimeout sets TCP_USER_TIMEOUT (tcp(7)): how long transmitted data
// may stay unacknowledged before the kernel breaks the connection with
// ETIMEDOUT, the TCP analogue of an RC queue pair's retry budget. d <= 0
// leaves the kernel's default.
func setUserTimeout(c *net.TCPConn, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	ms := int(d.Milliseconds())
	if ms < 1 {
		ms = 1
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, ms)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("tcp: setsockopt(TCP_USER_TIMEOUT, %d ms): %w", ms, serr)
	}
	return nil
}

// tcpInfo reads TCP_INFO (tcp(7)): the smoothed RTT, the send MSS and the
// total number of retransmitted segments.
func tcpInfo(c *net.TCPConn) (rtt time.Duration, mss int, retrans uint64, err error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, 0, 0, err
	}
	var info *unix.TCPInfo
	var serr error
	if err := rc.Control(func(fd uintptr) {
		info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil {
		return 0, 0, 0, err
	}
	if serr != nil {
		return 0, 0, 0, fmt.Errorf("tcp: getsockopt(TCP_INFO): %w", serr)
	}
	return time.Duration(info.Rtt) * time.Microsecond, int(info.Snd_mss), uint64(info.Total_retrans), nil
}
