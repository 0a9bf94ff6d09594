//go:build !linux

package main

import (
	"fmt"
	"os"
)

// mapFile reads the file at path (no mmap here) and returns its bytes.
func mapFile(path string, size int64) ([]byte, func(), error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	if int64(len(b)) != size {
		return nil, nil, fmt.Errorf("%s changed size: %d bytes, was %d", path, len(b), size)
	}
	return b, func() {}, nil
}

// loadFile reads the file at path into memory.
func loadFile(path string, size int64) ([]byte, func(), error) { return mapFile(path, size) }
