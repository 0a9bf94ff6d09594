package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/verbs"
)

// devicesOpts are the flags of `mptx devices`.
type devicesOpts struct {
	asJSON      bool
	sysfs       string
	cluster     string
	self, peer  string
	numa        int
	pci         string
	showChoices bool
}

func init() {
	o := devicesOpts{}
	cmd := &cobra.Command{
		Use:   "devices",
		Short: "List RDMA devices: ports, GIDs, NUMA node, PCIe placement, netdev addresses, rails; rank them for a transfer",
		Long: `devices lists the RDMA devices libibverbs sees (ibv_get_device_list), joined
with rdma netlink (` + "`rdma link show`" + `) and sysfs: one row per RoCEv2 GID of every
port, with the port's state, link layer, active MTU, speed, netdev and NUMA
node. These are the names mptx send/recv take in --devices.

A second table shows where each device sits: its NUMA node (a soft device
such as rxe inherits its netdev's PCI function's), its PCI function and path
from the host bridge, which devices share a PCIe switch (same letter), its
netdevs with their addresses (netlink), and, given a cluster topology file
(--cluster; see qp/verbs.Cluster for the format), its rail and leaf switch.

With --numa, --pci or --peer, a third table ranks the devices for a
transfer of memory on that NUMA node or PCI device (a GPU) to that peer:
rail-aligned NICs first, then those nearest the memory (its PCIe switch,
its NUMA node), each paired with the peer's NIC on its rail. Tier 0 is
what a transfer uses first; the rest is the fall-back.`,
		Example: `  mptx devices
  mptx devices --json
  mptx devices --numa 1
  mptx devices --pci 0000:3b:00.0 --cluster cluster.yaml --peer node-b`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.showChoices = cmd.Flags().Changed("numa") || o.pci != "" || o.peer != ""
			return runDevices(cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.asJSON, "json", false, "print devices, placement and choices as one JSON object")
	f.StringVar(&o.sysfs, "sysfs", "", "read placement from this sysfs tree instead of /sys (and skip libibverbs and netlink)")
	f.StringVar(&o.cluster, "cluster", "", "cluster topology file (YAML or JSON): rails and leaf switches of every host's NICs")
	f.StringVar(&o.self, "self", "", "this host's name in the cluster file (default: the hostname)")
	f.StringVar(&o.peer, "peer", "", "rank the devices for a transfer to this host (a name or address in the cluster file)")
	f.IntVar(&o.numa, "numa", -1, "rank the devices for memory on this NUMA node")
	f.StringVar(&o.pci, "pci", "", "rank the devices for memory of this PCI device (a GPU: 0000:3b:00.0)")
	addCommand(cmd)
}

// devicesOutput is the JSON form.
type devicesOutput struct {
	Devices   []verbs.Device     `json:"devices"`
	Placement []verbs.Placement  `json:"placement"`
	Nodes     []verbs.NUMANode   `json:"numa_nodes"`
	Choices   []verbs.PathChoice `json:"choices,omitempty"`
	Notes     []string           `json:"notes,omitempty"`
	Cluster   *verbs.ClusterHost `json:"cluster_host,omitempty"`
}

func runDevices(w io.Writer, o devicesOpts) error {
	var out devicesOutput
	root := verbs.SysRoot
	if o.sysfs != "" {
		root = o.sysfs
	} else {
		devs, err := verbs.Devices()
		switch {
		case errors.Is(err, qp.ErrNotSupported):
			out.Notes = append(out.Notes, "this mptx was built without libibverbs: ports and GIDs are not shown")
		case err != nil:
			return err
		}
		out.Devices = devs
	}
	topo, err := verbs.ReadTopology(root)
	if err != nil {
		return err
	}
	if o.sysfs == "" {
		if err := topo.ReadAddrs(); err != nil {
			out.Notes = append(out.Notes, fmt.Sprintf("netdev addresses: %v", err))
		}
	}
	var cluster *verbs.Cluster
	if o.cluster != "" {
		if cluster, err = verbs.LoadCluster(o.cluster); err != nil {
			return badInput("%v", err)
		}
		if o.self == "" {
			if o.self, err = os.Hostname(); err != nil {
				return fmt.Errorf("this host's name (set --self): %w", err)
			}
		}
		if h, ok := cluster.Host(o.self); ok {
			out.Cluster = h
		} else {
			out.Notes = append(out.Notes, fmt.Sprintf("this host %q is not in %s (set --self)", o.self, o.cluster))
		}
	}
	if o.peer != "" && cluster == nil {
		return badInput("--peer needs --cluster (the rails of both hosts)")
	}
	if o.showChoices {
		q := verbs.PathQuery{Memory: verbs.Locality{NUMANode: o.numa}, Cluster: cluster, Self: o.self, Peer: o.peer}
		if o.pci != "" {
			hb, path, numa, err := verbs.PCIePath(root, o.pci)
			if err != nil {
				return badInput("--pci: %v", err)
			}
			q.Memory.PCIAddr, q.Memory.PCIHostBridge, q.Memory.PCIPath = o.pci, hb, path
			if o.numa < 0 {
				q.Memory.NUMANode = numa
			}
		}
		if o.peer == "" {
			q.Cluster = nil
		}
		q.Candidates = activeDevices(out.Devices, topo)
		if out.Choices, err = verbs.ChoosePaths(topo, q); err != nil {
			return badInput("%v", err)
		}
	}
	out.Placement, out.Nodes = topo.Devices, topo.Nodes
	if o.asJSON {
		if out.Devices == nil {
			out.Devices = []verbs.Device{}
		}
		if out.Placement == nil {
			out.Placement = []verbs.Placement{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	for _, n := range out.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if len(topo.Devices) == 0 && len(out.Devices) == 0 {
		fmt.Fprintln(w, "no RDMA devices (no RDMA driver loaded, or this kernel has none).")
		fmt.Fprintln(w, "Soft-RoCE on an Ethernet interface: rdma link add rxe0 type rxe netdev eth0")
		return nil
	}
	if len(out.Devices) > 0 {
		if err := verbs.WriteTable(w, out.Devices); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	if err := verbs.WriteTopology(w, topo, cluster, o.self); err != nil {
		return err
	}
	if o.showChoices {
		fmt.Fprintln(w)
		return verbs.WriteChoices(w, out.Choices)
	}
	return nil
}

// activeDevices returns the devices with an ACTIVE port, in topology
// order; every device when libibverbs gave no port states (--sysfs).
func activeDevices(devs []verbs.Device, topo *verbs.Topology) []string {
	var out []string
	for _, p := range topo.Devices {
		if len(devs) == 0 {
			out = append(out, p.Device)
			continue
		}
		for _, d := range devs {
			if d.Name != p.Device {
				continue
			}
			for _, port := range d.Ports {
				if port.Active() {
					out = append(out, p.Device)
					break
				}
			}
		}
	}
	return out
}
