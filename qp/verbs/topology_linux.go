//go:build linux

package verbs

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// ReadAddrs fills every placement's Addrs with its netdevs' addresses
// (netlink RTM_GETADDR, `ip addr show dev NETDEV`). A netdev that is gone
// is skipped; other netlink failures are returned.
func (t *Topology) ReadAddrs() error {
	for i := range t.Devices {
		p := &t.Devices[i]
		p.Addrs = nil
		for _, nd := range p.Netdevs {
			link, err := netlink.LinkByName(nd)
			if err != nil {
				if _, ok := err.(netlink.LinkNotFoundError); ok {
					continue
				}
				return fmt.Errorf("verbs: netlink: link %s: %w", nd, err)
			}
			addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
			if err != nil {
				return fmt.Errorf("verbs: netlink: addresses of %s: %w", nd, err)
			}
			for _, a := range addrs {
				if a.IPNet == nil {
					continue
				}
				ip, ok := netip.AddrFromSlice(a.IP)
				if !ok {
					continue
				}
				ones, _ := a.Mask.Size()
				p.Addrs = append(p.Addrs, netip.PrefixFrom(ip.Unmap(), ones))
			}
		}
	}
	return nil
}
