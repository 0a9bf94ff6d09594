package verbs

import (
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/mptx-dev/mptx/units"
)

// GIDType is the type of a GID table entry (ibv_query_gid_ex(3),
// enum ibv_gid_type).
type GIDType uint8

// GID types.
const (
	GIDIB     GIDType = iota // InfiniBand
	GIDRoCEv1                // RoCE v1 (Ethernet, no IP header)
	GIDRoCEv2                // RoCE v2 (UDP/IP, port 4791)
)

// String returns the type as ibv_devinfo prints it.
func (t GIDType) String() string {
	switch t {
	case GIDIB:
		return "IB"
	case GIDRoCEv1:
		return "RoCE v1"
	case GIDRoCEv2:
		return "RoCE v2"
	}
	return fmt.Sprintf("GIDType(%d)", uint8(t))
}

// GID is one entry of a port's GID table.
type GID struct {
	Index  int
	Type   GIDType
	Raw    [16]byte
	Addr   netip.Addr // Raw as an address; IPv4-mapped entries unmapped (10.77.0.1)
	Netdev string     // the netdev the entry belongs to ("" if none)
}

// IPv4 reports whether the GID is an IPv4-mapped address (::ffff:a.b.c.d).
func (g GID) IPv4() bool { return netip.AddrFrom16(g.Raw).Is4In6() }

// Port is one port of a device (ibv_query_port(3), /sys/class/infiniband).
type Port struct {
	Num       int    // 1-based
	State     string // "ACTIVE", "DOWN", "INIT", "ARMED" (ibv_port_state_str)
	PhysState string // "LINK_UP", "DISABLED", ... ("" if unknown)
	LinkLayer string // "Ethernet" or "InfiniBand"
	ActiveMTU units.Bytes
	MaxMTU    units.Bytes
	MaxMsg    units.Bytes   // largest message (max_msg_sz)
	Speed     units.BitRate // active width × lane speed
	Netdev    string        // Ethernet netdev behind the port ("" if none)
	GIDs      []GID         // valid entries only, by index
}

// Active reports whether the port is ACTIVE.
func (p Port) Active() bool { return p.State == "ACTIVE" }

// RoCEv2 returns the port's RoCEv2 GIDs.
func (p Port) RoCEv2() []GID {
	var out []GID
	for _, g := range p.GIDs {
		if g.Type == GIDRoCEv2 {
			out = append(out, g)
		}
	}
	return out
}

// PickGID returns the GID mptx uses as a path's source on this port: the
// entry at index when index > 0, else the first RoCEv2 GID holding an
// IPv4-mapped address, else the first RoCEv2 GID (see HostConfig.GIDIndex).
func (p Port) PickGID(index int) (GID, bool) {
	if index > 0 {
		for _, g := range p.GIDs {
			if g.Index == index {
				return g, true
			}
		}
		return GID{}, false
	}
	v2 := p.RoCEv2()
	for _, g := range v2 {
		if g.IPv4() {
			return g, true
		}
	}
	if len(v2) > 0 {
		return v2[0], true
	}
	return GID{}, false
}

// DeviceCaps are the device capabilities mptx uses
// (ibv_query_device_ex(3)).
type DeviceCaps struct {
	MemoryWindow      bool   // IBV_DEVICE_MEM_WINDOW (type 1)
	MemoryWindowType2 bool   // IBV_DEVICE_MEM_WINDOW_TYPE_2A or _2B
	Timestamps        bool   // completion_timestamp_mask != 0
	HWRateLimit       bool   // packet_pacing_caps.qp_rate_limit_max > 0
	RateLimitMinKbps  uint32 // packet_pacing_caps.qp_rate_limit_min
	RateLimitMaxKbps  uint32 // packet_pacing_caps.qp_rate_limit_max
	CoreClockKHz      uint64 // hca_core_clock, kHz (0 if none)
	TimestampMask     uint64 // completion_timestamp_mask (0 if none)
	MaxQP             int
	MaxQPWR           int
	MaxCQE            int
	MaxSRQWR          int
	MaxMR             int
	MaxMW             int
	// MaxQPRdAtom is how many RDMA READs a QP answers at once as a
	// responder (max_qp_rd_atom: the most max_dest_rd_atomic may be);
	// MaxQPInitRdAtom how many it keeps outstanding as a requester
	// (max_qp_init_rd_atom: the most max_rd_atomic may be).
	MaxQPRdAtom     int
	MaxQPInitRdAtom int
}

// Device is one RDMA device as seen through libibverbs, rdma netlink and
// sysfs.
type Device struct {
	Name            string // "rxe0", "mlx5_0"
	Index           int    // rdma netlink device index (-1 if netlink is unavailable)
	NodeGUID        string // "ac3f:3bff:fef2:16d2"
	SysImageGUID    string
	FirmwareVersion string
	VendorID        uint32
	VendorPartID    uint32
	NUMANode        int // -1 if unknown (soft devices such as rxe have none)
	Caps            DeviceCaps
	Ports           []Port
}

// Soft reports whether the device is Soft-RoCE (rdma_rxe), recognised by
// rxe's vendor id 0xffffff with part id 0.
func (d Device) Soft() bool { return d.VendorID == 0xffffff && d.VendorPartID == 0 }

// Port returns port num (1-based).
func (d Device) Port(num int) (Port, bool) {
	for _, p := range d.Ports {
		if p.Num == num {
			return p, true
		}
	}
	return Port{}, false
}

// WriteTable prints devs as the table `mptx devices` shows: one row per
// RoCEv2 GID of every port (one row for a port without one).
func WriteTable(w io.Writer, devs []Device) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tPORT\tSTATE\tLINK\tMTU\tSPEED\tNETDEV\tNUMA\tGID\tTYPE\tADDRESS")
	sorted := append([]Device(nil), devs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, d := range sorted {
		numa := "-"
		if d.NUMANode >= 0 {
			numa = strconv.Itoa(d.NUMANode)
		}
		for _, p := range d.Ports {
			speed := "-"
			if p.Speed > 0 {
				speed = p.Speed.String()
			}
			netdev := p.Netdev
			if netdev == "" {
				netdev = "-"
			}
			row := fmt.Sprintf("%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s", d.Name, p.Num, p.State, p.LinkLayer, int64(p.ActiveMTU), speed, netdev, numa)
			gids := p.RoCEv2()
			if len(gids) == 0 {
				fmt.Fprintf(tw, "%s\t-\t-\t-\n", row)
				continue
			}
			for _, g := range gids {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", row, g.Index, g.Type, g.Addr)
			}
		}
	}
	return tw.Flush()
}

// parseDeviceSpec splits "dev" or "dev:port" into a name and a 1-based
// port.
func parseDeviceSpec(s string) (string, int, error) {
	name, port, ok := strings.Cut(s, ":")
	if name == "" {
		return "", 0, fmt.Errorf("verbs: device %q: empty name; want \"dev\" or \"dev:port\"", s)
	}
	if !ok {
		return name, 1, nil
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 255 {
		return "", 0, fmt.Errorf("verbs: device %q: port %q, want 1..255", s, port)
	}
	return name, n, nil
}

// nicChoice is a usable (device, port, GID) triple.
type nicChoice struct {
	Dev  Device
	Port Port
	GID  GID
}

// chooseNICs resolves HostConfig.Devices against the enumerated devices.
// Named devices must exist, be ACTIVE and have a GID (each problem is an
// error that lists what is available). With no names, every ACTIVE port
// with a RoCEv2 GID is used, sorted by device name; having none is
// ErrNoDevice.
func chooseNICs(devs []Device, names []string, gidIndex int) ([]nicChoice, error) {
	var out []nicChoice
	if len(names) == 0 {
		for _, d := range devs {
			for _, p := range d.Ports {
				if !p.Active() {
					continue
				}
				g, ok := p.PickGID(gidIndex)
				if !ok || g.Type != GIDRoCEv2 {
					continue
				}
				out = append(out, nicChoice{d, p, g})
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w: %s", ErrNoDevice, describeAvailable(devs))
		}
		sort.SliceStable(out, func(i, j int) bool { return out[i].Dev.Name < out[j].Dev.Name })
		return out, nil
	}
	seen := map[string]bool{}
	for _, spec := range names {
		name, pnum, err := parseDeviceSpec(spec)
		if err != nil {
			return nil, err
		}
		key := name + ":" + strconv.Itoa(pnum)
		if seen[key] {
			return nil, fmt.Errorf("verbs: device %q listed twice", spec)
		}
		seen[key] = true
		var dev *Device
		for i := range devs {
			if devs[i].Name == name {
				dev = &devs[i]
			}
		}
		if dev == nil {
			return nil, fmt.Errorf("%w: device %q not found; %s", ErrNoDevice, name, describeAvailable(devs))
		}
		p, ok := dev.Port(pnum)
		if !ok {
			return nil, fmt.Errorf("verbs: device %s has no port %d (ports 1..%d)", name, pnum, len(dev.Ports))
		}
		if !p.Active() {
			return nil, fmt.Errorf("%w: %s port %d is %s, not ACTIVE (is its netdev %q up?)", ErrNoDevice, name, pnum, p.State, p.Netdev)
		}
		g, ok := p.PickGID(gidIndex)
		if !ok {
			return nil, fmt.Errorf("%w: %s port %d has no usable GID (index %d); its RoCEv2 GIDs: %v", ErrNoDevice, name, pnum, gidIndex, gidList(p.RoCEv2()))
		}
		out = append(out, nicChoice{*dev, p, g})
	}
	return out, nil
}

func gidList(gs []GID) []string {
	var s []string
	for _, g := range gs {
		s = append(s, fmt.Sprintf("%d=%s", g.Index, g.Addr))
	}
	return s
}

func describeAvailable(devs []Device) string {
	if len(devs) == 0 {
		return "no RDMA devices at all (load a driver, e.g. `rdma link add rxe0 type rxe netdev eth0`)"
	}
	var parts []string
	for _, d := range devs {
		for _, p := range d.Ports {
			parts = append(parts, fmt.Sprintf("%s:%d %s %d RoCEv2 GIDs", d.Name, p.Num, p.State, len(p.RoCEv2())))
		}
	}
	return "available: " + strings.Join(parts, ", ")
}

// preferLocal orders NIC indices for a buffer on NUMA node node: when the
// NICs span several known NUMA nodes and some sit on node, only those are
// returned (in their original order); otherwise all of them. numa[i] is
// NIC i's node (-1 unknown).
func preferLocal(numa []int, node int) []int {
	nodes := map[int]bool{}
	for _, n := range numa {
		if n >= 0 {
			nodes[n] = true
		}
	}
	all := make([]int, len(numa))
	for i := range all {
		all[i] = i
	}
	if node < 0 || len(nodes) < 2 {
		return all
	}
	var local []int
	for i, n := range numa {
		if n == node {
			local = append(local, i)
		}
	}
	if len(local) == 0 {
		return all
	}
	return local
}

// NIC is an opened NIC as Host.NICs reports it.
type NIC struct {
	Device Device
	Port   Port
	GID    GID // the source GID paths on this NIC use
}
