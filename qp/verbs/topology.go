package verbs

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Placement is where an RDMA device sits in its host, as sysfs shows it:
// its NUMA node and its place in the PCIe tree, and the netdevs behind its
// ports with their addresses.
//
// Sources: /sys/class/infiniband/DEV/device (a link to the PCI function,
// absent for soft devices such as rxe), its numa_node and the chain of
// bridges in the resolved path (/sys/devices/pci0000:3a/0000:3a:00.0/
// 0000:3b:00.0); the netdevs from ports/N/gid_attrs/ndevs/* (RoCE) and
// device/net/*; a soft device takes the NUMA node and PCIe path of its
// netdev's PCI function (/sys/class/net/NETDEV/device) when it has one.
// Addresses come from netlink (RTM_GETADDR, `ip addr show`) when asked.
type Placement struct {
	Device string // "mlx5_0", "rxe0"
	// NUMANode is the device's node, -1 if unknown (no PCI function, or
	// a kernel without NUMA: numa_node reads -1).
	NUMANode int
	// PCIAddr is the PCI function ("0000:3b:00.0"); "" for a soft device
	// over a netdev without one (veth).
	PCIAddr string
	// HostBridge is the PCI host bridge ("pci0000:3a", the root complex)
	// and PCIPath the functions from the root port down to PCIAddr
	// ("0000:3a:00.0", "0000:3b:00.0"): two devices whose paths share a
	// bridge below the root port sit behind one PCIe switch.
	HostBridge string
	PCIPath    []string
	// Via says where NUMANode and the PCIe path came from: "device", or
	// "netdev NAME" for a soft device that inherits its netdev's.
	Via string
	// Netdevs are the netdevs behind the device's ports; Addrs their
	// addresses (netlink; empty if not read).
	Netdevs []string
	Addrs   []netip.Prefix
}

// Topology is a host's RDMA placement: every device under
// /sys/class/infiniband, by name, and the host's NUMA nodes.
type Topology struct {
	Devices []Placement // sorted by name
	Nodes   []NUMANode  // from /sys/devices/system/node; empty without NUMA
}

// NUMANode is one node of the host.
type NUMANode struct {
	ID   int
	CPUs string // cpulist, "0-15,32-47"
}

// Device returns the placement of device name.
func (t *Topology) Device(name string) (Placement, bool) {
	for _, p := range t.Devices {
		if p.Device == name {
			return p, true
		}
	}
	return Placement{}, false
}

// SysRoot is where ReadTopology reads sysfs by default.
const SysRoot = "/sys"

var bdfRE = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// ReadTopology reads the placement of every RDMA device from the sysfs
// tree at root (SysRoot, or a directory laid out like it: tests build
// synthetic trees). Netdev addresses are left empty; Topology.ReadAddrs
// fills them. A host without RDMA devices has an empty Topology and no
// error; an unreadable tree is an error.
func ReadTopology(root string) (*Topology, error) {
	t := &Topology{}
	ib := filepath.Join(root, "class", "infiniband")
	ents, err := os.ReadDir(ib)
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("verbs: reading %s: %w", ib, err)
	}
	for _, e := range ents {
		t.Devices = append(t.Devices, readPlacement(root, e.Name()))
	}
	sort.Slice(t.Devices, func(i, j int) bool { return t.Devices[i].Device < t.Devices[j].Device })
	nodes, _ := filepath.Glob(filepath.Join(root, "devices", "system", "node", "node[0-9]*"))
	for _, n := range nodes {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(n), "node"))
		if err != nil {
			continue
		}
		t.Nodes = append(t.Nodes, NUMANode{ID: id, CPUs: readFile(filepath.Join(n, "cpulist"))})
	}
	sort.Slice(t.Nodes, func(i, j int) bool { return t.Nodes[i].ID < t.Nodes[j].ID })
	return t, nil
}

func readPlacement(root, name string) Placement {
	p := Placement{Device: name, NUMANode: -1}
	dir := filepath.Join(root, "class", "infiniband", name)
	// Netdevs: the GID table's (RoCE ports), then the PCI function's.
	seen := map[string]bool{}
	ports, _ := filepath.Glob(filepath.Join(dir, "ports", "*", "gid_attrs", "ndevs", "*"))
	sort.Strings(ports)
	for _, f := range ports {
		if nd := readFile(f); nd != "" && !seen[nd] {
			seen[nd] = true
			p.Netdevs = append(p.Netdevs, nd)
		}
	}
	nets, _ := os.ReadDir(filepath.Join(dir, "device", "net"))
	for _, e := range nets {
		if !seen[e.Name()] {
			seen[e.Name()] = true
			p.Netdevs = append(p.Netdevs, e.Name())
		}
	}
	if pciPlace(root, filepath.Join(dir, "device"), &p) {
		p.Via = "device"
		return p
	}
	for _, nd := range p.Netdevs {
		if pciPlace(root, filepath.Join(root, "class", "net", nd, "device"), &p) {
			p.Via = "netdev " + nd
			return p
		}
	}
	return p
}

// pciPlace fills p's NUMA node and PCIe path from the PCI function the
// link at dev points to; false if it is not a PCI function.
func pciPlace(root, dev string, p *Placement) bool {
	real, err := filepath.EvalSymlinks(dev)
	if err != nil {
		return false
	}
	devices, err := filepath.EvalSymlinks(filepath.Join(root, "devices"))
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(devices, real)
	if err != nil || strings.HasPrefix(rel, "..") {
		return false
	}
	// pci0000:3a/0000:3a:00.0/0000:3b:00.0[/virtio0/...]: the host
	// bridge, then PCI functions down to the device's (a virtio netdev's
	// parent is its PCI function).
	parts := strings.Split(filepath.ToSlash(rel), "/")
	if len(parts) < 2 || !strings.HasPrefix(parts[0], "pci") {
		return false
	}
	var path []string
	for _, c := range parts[1:] {
		if !bdfRE.MatchString(c) {
			break
		}
		path = append(path, c)
	}
	if len(path) == 0 {
		return false
	}
	real = filepath.Join(devices, parts[0], filepath.Join(path...))
	p.HostBridge = parts[0]
	p.PCIPath = path
	p.PCIAddr = path[len(path)-1]
	p.NUMANode = readIntFile(filepath.Join(real, "numa_node"), -1)
	return true
}

// PCIePath returns the PCIe placement of an arbitrary PCI function (a
// GPU, say: "0000:3b:00.0") in the tree at root, for Locality.PCIAddr.
func PCIePath(root, addr string) (hostBridge string, path []string, numa int, err error) {
	if !bdfRE.MatchString(addr) {
		return "", nil, -1, fmt.Errorf("verbs: PCI address %q: want domain:bus:device.function, e.g. 0000:3b:00.0", addr)
	}
	var p Placement
	if !pciPlace(root, filepath.Join(root, "bus", "pci", "devices", addr), &p) {
		return "", nil, -1, fmt.Errorf("verbs: PCI function %s not found under %s/bus/pci/devices", addr, root)
	}
	return p.HostBridge, p.PCIPath, p.NUMANode, nil
}

// PCIeRelation classifies how far apart two PCI functions are, in the
// terms of `nvidia-smi topo -m`.
type PCIeRelation uint8

// PCIe relations, nearest first.
const (
	// PCIeSwitch (PIX/PXB): the two share a bridge below the host bridge
	// (a PCIe switch, or one root port: two functions of one card);
	// peer-to-peer traffic stays below the root complex.
	PCIeSwitch PCIeRelation = iota
	// PCIeHostBridge (PHB): the same host bridge, different root ports.
	PCIeHostBridge
	// PCIeNode (NODE): different host bridges of one NUMA node.
	PCIeNode
	// PCIeSystem (SYS): different NUMA nodes (the inter-socket link).
	PCIeSystem
	// PCIeUnknown: one of them has no PCIe placement.
	PCIeUnknown
)

var pcieNames = [...]string{"switch", "host-bridge", "node", "system", "unknown"}

// String returns the relation's name.
func (r PCIeRelation) String() string {
	if int(r) < len(pcieNames) {
		return pcieNames[r]
	}
	return fmt.Sprintf("PCIeRelation(%d)", uint8(r))
}

// pcieRelation relates two placements (host bridge, path, NUMA node).
func pcieRelation(hbA string, a []string, numaA int, hbB string, b []string, numaB int) PCIeRelation {
	if len(a) == 0 || len(b) == 0 {
		return PCIeUnknown
	}
	if hbA != hbB {
		if numaA >= 0 && numaB >= 0 && numaA != numaB {
			return PCIeSystem
		}
		return PCIeNode
	}
	// Shared functions from the root port down; the last element of each
	// path is the function itself, so a shared ancestor must be a proper
	// prefix of both.
	n := 0
	for n < len(a)-1 && n < len(b)-1 && a[n] == b[n] {
		n++
	}
	if n >= 1 {
		return PCIeSwitch
	}
	return PCIeHostBridge
}

// pathString renders the PCIe path as "pci0000:3a/0000:3a:00.0/0000:3b:00.0".
func (p Placement) pathString() string {
	if p.HostBridge == "" {
		return "-"
	}
	return p.HostBridge + "/" + strings.Join(p.PCIPath, "/")
}

// sharesSwitch reports whether a and b sit behind one PCIe switch.
func sharesSwitch(a, b Placement) bool {
	return pcieRelation(a.HostBridge, a.PCIPath, a.NUMANode, b.HostBridge, b.PCIPath, b.NUMANode) == PCIeSwitch
}

// switchGroups labels the devices that share a PCIe switch: devices in
// one group get the same letter ("A", "B", ...), others "-".
func switchGroups(devs []Placement) []string {
	out := make([]string, len(devs))
	next := 0
	for i := range devs {
		if out[i] != "" {
			continue
		}
		for j := i + 1; j < len(devs); j++ {
			if out[j] == "" && sharesSwitch(devs[i], devs[j]) {
				if out[i] == "" {
					out[i] = string(rune('A' + next%26))
					next++
				}
				out[j] = out[i]
			}
		}
		if out[i] == "" {
			out[i] = "-"
		}
	}
	return out
}

// addrStrings formats addresses for display.
func addrStrings(as []netip.Prefix) string {
	if len(as) == 0 {
		return "-"
	}
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(slices.Compact(s), ",")
}
