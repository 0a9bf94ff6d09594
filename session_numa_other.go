//go:build !linux

package mptx

// NUMANode returns -1: NUMA placement is read on Linux only.
func (b *Buffer) NUMANode() int { return -1 }
