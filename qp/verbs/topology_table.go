package verbs

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteTopology prints t as `mptx devices --topology` shows it: one row
// per device with its NUMA node, PCI function, PCIe switch group (devices
// with the same letter sit behind one switch or root port), PCIe path,
// netdevs and addresses, and, with a cluster file, its rail and switch on
// host self.
func WriteTopology(w io.Writer, t *Topology, c *Cluster, self string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tNUMA\tPCI\tSWITCH\tNETDEV\tADDRESSES\tRAIL\tLEAF\tPCIE PATH")
	groups := switchGroups(t.Devices)
	host, _ := c.Host(self)
	for i, p := range t.Devices {
		numa := "-"
		if p.NUMANode >= 0 {
			numa = strconv.Itoa(p.NUMANode)
		}
		if p.Via != "" && p.Via != "device" {
			numa += " (" + p.Via + ")"
		}
		pci := p.PCIAddr
		if pci == "" {
			pci = "-"
		}
		nd := strings.Join(p.Netdevs, ",")
		if nd == "" {
			nd = "-"
		}
		rail, leaf := "-", "-"
		if n, ok := host.NIC(p.Device); ok {
			rail = n.Rail
			if n.Switch != "" {
				leaf = n.Switch
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Device, numa, pci, groups[i], nd, addrStrings(p.Addrs), rail, leaf, p.pathString())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(t.Nodes) > 0 {
		var s []string
		for _, n := range t.Nodes {
			s = append(s, fmt.Sprintf("node%d cpus %s", n.ID, n.CPUs))
		}
		_, err := fmt.Fprintf(w, "NUMA: %s\n", strings.Join(s, "; "))
		return err
	}
	return nil
}

// WriteChoices prints ranked path choices, best tier first.
func WriteChoices(w io.Writer, cs []PathChoice) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIER\tDEVICE\tPEER\tMEMORY\tRAIL\tUSE")
	for _, c := range cs {
		peer := c.Peer
		if peer == "" {
			peer = "-"
		}
		use := "preferred"
		if c.Tier > cs[0].Tier {
			use = "fallback"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", c.Tier, c.Device, peer, c.Mem, c.Rail, use)
	}
	return tw.Flush()
}
