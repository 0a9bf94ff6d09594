//go:build linux

package mptx

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// NUMANode returns the NUMA node of the buffer's first page
// (get_mempolicy(2) with MPOL_F_NODE|MPOL_F_ADDR), -1 if unknown (a page
// not touched yet has none). It is what topology-aware NIC choice takes
// as the tensor's place (qp/verbs.Locality).
func (b *Buffer) NUMANode() int {
	var node int32
	const mpolFNode, mpolFAddr = 1, 2
	_, _, e := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&node)), 0, 0,
		uintptr(unsafe.Pointer(&b.mem[0])), mpolFNode|mpolFAddr, 0)
	if e != 0 {
		return -1
	}
	return int(node)
}
