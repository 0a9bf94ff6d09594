package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the file at path read-only (mmap(2), MAP_SHARED |
// MAP_POPULATE) and returns its bytes and the function that unmaps them: a
// file is sent straight from the page cache, copied once, into the
// session's send buffer. MAP_POPULATE maps every page up front: copying a
// 1 GiB file out of the mapping took 3.8 s page fault by page fault here,
// 0.17 s + 1.6 s populated. size is the size the file had when it was
// checked; a file that changed size since is an error (one truncated while
// it is copied faults the process: SIGBUS).
func mapFile(path string, size int64) ([]byte, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if st.Size() != size {
		return nil, nil, fmt.Errorf("%s changed size: %d bytes, was %d", path, st.Size(), size)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	_ = unix.Madvise(b, unix.MADV_SEQUENTIAL)
	return b, func() { _ = unix.Munmap(b) }, nil
}
