//go:build linux && cgo

package verbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/vishvananda/netlink"

	"github.com/mptx-dev/mptx/units"
)

// Devices lists the RDMA devices of this host: every device
// ibv_get_device_list(3) returns, opened read-only to query its attributes
// (ibv_query_device_ex(3)), ports (ibv_query_port(3)) and GID tables
// (ibv_query_gid_table(3)), joined with rdma netlink's device list
// (netlink.RdmaLinkList; `rdma link show`) and sysfs (NUMA node, port
// rate). A host without RDMA support returns an empty list and no error.
func Devices() ([]Device, error) {
	var n C.int
	list, err := C.ibv_get_device_list(&n)
	if list == nil {
		e := errnoOf(err)
		if e == 0 || e == 38 /* ENOSYS */ || e == 2 /* ENOENT */ {
			return nil, nil
		}
		return nil, verbError("ibv_get_device_list", "", e)
	}
	defer C.ibv_free_device_list(list)

	links := map[string]*netlink.RdmaLink{}
	if ls, err := netlink.RdmaLinkList(); err == nil {
		for _, l := range ls {
			links[l.Attrs.Name] = l
		}
	}
	var out []Device
	for i := 0; i < int(n); i++ {
		d, err := describeDevice(C.mptx_dev_at(list, C.int(i)), links)
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
	return out, nil
}

func describeDevice(dev *C.struct_ibv_device, links map[string]*netlink.RdmaLink) (Device, error) {
	d := Device{Name: C.GoString(C.ibv_get_device_name(dev)), Index: -1, NUMANode: -1}
	d.NodeGUID = guidString(uint64(C.ibv_get_device_guid(dev)))
	if l, ok := links[d.Name]; ok {
		d.Index = int(l.Attrs.Index)
		d.SysImageGUID = l.Attrs.SysImageGuid
		d.FirmwareVersion = l.Attrs.FirmwareVersion
	}
	// The device's NUMA node, or a soft device's netdev's (topology.go).
	d.NUMANode = readPlacement(filepath.Dir(filepath.Dir(sysfsRoot)), d.Name).NUMANode

	ctx, err := C.ibv_open_device(dev)
	if ctx == nil {
		return d, nilErr("ibv_open_device", d.Name, err)
	}
	defer C.ibv_close_device(ctx)
	var attr C.struct_ibv_device_attr_ex
	if rc := C.mptx_query_device(ctx, &attr); rc != 0 {
		return d, callErr("ibv_query_device_ex", d.Name, rc)
	}
	d.Caps = capsOf(&attr)
	o := &attr.orig_attr
	d.VendorID = uint32(o.vendor_id)
	d.VendorPartID = uint32(o.vendor_part_id)
	if d.FirmwareVersion == "" {
		d.FirmwareVersion = C.GoString(&o.fw_ver[0])
	}
	for p := 1; p <= int(o.phys_port_cnt); p++ {
		port, err := describePort(ctx, d.Name, p)
		if err != nil {
			return d, err
		}
		d.Ports = append(d.Ports, port)
	}
	return d, nil
}

func capsOf(a *C.struct_ibv_device_attr_ex) DeviceCaps {
	o := &a.orig_attr
	flags := uint64(o.device_cap_flags)
	return DeviceCaps{
		MemoryWindow:      flags&C.IBV_DEVICE_MEM_WINDOW != 0,
		MemoryWindowType2: flags&(C.IBV_DEVICE_MEM_WINDOW_TYPE_2A|C.IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0,
		Timestamps:        a.completion_timestamp_mask != 0,
		HWRateLimit:       a.packet_pacing_caps.qp_rate_limit_max > 0,
		RateLimitMinKbps:  uint32(a.packet_pacing_caps.qp_rate_limit_min),
		RateLimitMaxKbps:  uint32(a.packet_pacing_caps.qp_rate_limit_max),
		CoreClockKHz:      uint64(a.hca_core_clock),
		TimestampMask:     uint64(a.completion_timestamp_mask),
		MaxQP:             int(o.max_qp),
		MaxQPWR:           int(o.max_qp_wr),
		MaxCQE:            int(o.max_cqe),
		MaxSRQWR:          int(o.max_srq_wr),
		MaxMR:             int(o.max_mr),
		MaxMW:             int(o.max_mw),
		MaxQPRdAtom:       int(o.max_qp_rd_atom),
		MaxQPInitRdAtom:   int(o.max_qp_init_rd_atom),
	}
}

var physStates = map[int]string{1: "SLEEP", 2: "POLLING", 3: "DISABLED", 4: "TRAINING", 5: "LINK_UP", 6: "LINK_ERROR_RECOVERY", 7: "PHY_TEST"}

func describePort(ctx *C.struct_ibv_context, dev string, num int) (Port, error) {
	var pa C.struct_ibv_port_attr
	if rc := C.mptx_query_port(ctx, C.uint8_t(num), &pa); rc != 0 {
		return Port{}, callErr("ibv_query_port", dev, rc)
	}
	p := Port{
		Num:       num,
		State:     strings.TrimPrefix(strings.ToUpper(C.GoString(C.ibv_port_state_str(pa.state))), "PORT_"),
		PhysState: physStates[int(pa.phys_state)],
		ActiveMTU: mtuBytes(int(pa.active_mtu)),
		MaxMTU:    mtuBytes(int(pa.max_mtu)),
		MaxMsg:    units.Bytes(pa.max_msg_sz),
		LinkLayer: "InfiniBand",
	}
	if pa.link_layer == C.IBV_LINK_LAYER_ETHERNET {
		p.LinkLayer = "Ethernet"
	}
	p.Speed = parseRate(readFile(filepath.Join(sysfsRoot, dev, "ports", strconv.Itoa(num), "rate")))
	if n := int(pa.gid_tbl_len); n > 0 {
		gids, err := gidTable(ctx, dev, num, n)
		if err != nil {
			return p, err
		}
		p.GIDs = gids
		for _, g := range gids {
			if g.Netdev != "" {
				p.Netdev = g.Netdev
				break
			}
		}
	}
	return p, nil
}

// gidTable reads the valid entries of a port's GID table
// (ibv_query_gid_table(3) returns the valid entries of every port in one
// call; keep ours). The uverbs attribute length is 16 bits, so one call
// returns at most maxGIDTable entries; a device with more valid entries
// than that is read entry by entry with ibv_query_gid_ex(3).
func gidTable(ctx *C.struct_ibv_context, dev string, port, tblLen int) ([]GID, error) {
	const maxGIDTable = 2000 // 2000 × 32 bytes < 64 KiB
	buf := (*C.struct_ibv_gid_entry)(cAlloc(maxGIDTable * C.sizeof_struct_ibv_gid_entry))
	defer cFree(unsafe.Pointer(buf))
	n := C.ibv_query_gid_table(ctx, buf, maxGIDTable, 0)
	var entries []C.struct_ibv_gid_entry
	if n >= 0 {
		entries = unsafe.Slice(buf, int(n))
	} else {
		for i := 0; i < tblLen; i++ {
			if C.ibv_query_gid_ex(ctx, C.uint32_t(port), C.uint32_t(i), buf, 0) == 0 {
				entries = append(entries, *buf)
			}
		}
	}
	var out []GID
	names := map[uint32]string{}
	for i := range entries {
		e := &entries[i]
		if int(e.port_num) != port {
			continue
		}
		var g GID
		g.Index = int(e.gid_index)
		copy(g.Raw[:], C.GoBytes(unsafe.Pointer(&e.gid), 16))
		g.Addr = netip.AddrFrom16(g.Raw).Unmap()
		switch e.gid_type {
		case C.IBV_GID_TYPE_ROCE_V1:
			g.Type = GIDRoCEv1
		case C.IBV_GID_TYPE_ROCE_V2:
			g.Type = GIDRoCEv2
		default:
			g.Type = GIDIB
		}
		if idx := uint32(e.ndev_ifindex); idx != 0 {
			name, ok := names[idx]
			if !ok {
				if ifc, err := net.InterfaceByIndex(int(idx)); err == nil {
					name = ifc.Name
				}
				names[idx] = name
			}
			g.Netdev = name
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out, nil
}

func guidString(g uint64) string {
	// ibv_get_device_guid returns the GUID in network byte order.
	var b [8]byte
	*(*uint64)(unsafe.Pointer(&b[0])) = g
	return fmt.Sprintf("%02x%02x:%02x%02x:%02x%02x:%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7])
}
