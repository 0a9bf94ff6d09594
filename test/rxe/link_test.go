package rxe_test

import (
	"fmt"
	"testing"

	"github.com/vishvananda/netlink"
)

// setLink brings wire down or up with one netlink request (RTM_NEWLINK,
// IFF_UP cleared or set): no `ip` process, whose fork and exec take a
// few hundred milliseconds under TCG, long enough for the tensors in
// flight to finish before the wire goes down and the test to prove
// nothing.
func setLink(t testing.TB, wire string, up bool) {
	t.Helper()
	if err := linkSet(wire, up); err != nil {
		t.Fatal(err)
	}
}

func linkSet(wire string, up bool) error {
	l, err := netlink.LinkByName(wire)
	if err != nil {
		return fmt.Errorf("link %s: %w", wire, err)
	}
	if up {
		err = netlink.LinkSetUp(l)
	} else {
		err = netlink.LinkSetDown(l)
	}
	if err != nil {
		return fmt.Errorf("link %s up=%v: %w", wire, up, err)
	}
	return nil
}

// watchDown takes wire down as soon as it has sent at least after bytes
// more than base (its tx_bytes counter, polled without sleeping: the
// tensors in flight move tens of MiB a second), unless ended reports
// that the transfers ended first. It returns the bytes the wire had sent
// when it was taken down, or 0 if they ended first. It may run on a
// goroutine of its own.
func watchDown(wire string, base, after int64, ended func() bool) (int64, error) {
	for i := 0; ; i++ {
		c, err := readTxBytes(wire)
		if err != nil {
			return 0, err
		}
		if c -= base; c >= after {
			return c, linkSet(wire, false)
		}
		if i%64 == 0 && ended() {
			return 0, nil
		}
	}
}
