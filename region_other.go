//go:build !linux

package mptx

// makeRegion returns a zeroed receive region of size bytes.
func makeRegion(size int64) []byte { return make([]byte, size) }
