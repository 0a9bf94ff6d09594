package verbs

import (
	"fmt"
	"math"

	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
	"github.com/mptx-dev/mptx/units"
)

// checkAccept validates the receiver's Accept against what the sender
// offered: one endpoint per offered path, and a region that holds size
// bytes, is representable as units.Bytes and does not wrap the address
// space (every WRITE targets RegionAddr + offset). The receiver is
// authenticated, but a buggy or hostile one must not turn into a negative
// Region length or a wrapped remote address here.
func checkAccept(acc *bootstrap.Accept, size units.Bytes, paths int) error {
	if len(acc.Paths) != paths {
		return fmt.Errorf("%w: receiver answered %d paths for our %d", bootstrap.ErrProtocol, len(acc.Paths), paths)
	}
	if acc.RegionLen > uint64(units.MaxBytes) {
		return fmt.Errorf("%w: receiver advertised a %d-byte region (valid: %d..%d)", bootstrap.ErrProtocol, acc.RegionLen, int64(size), int64(units.MaxBytes))
	}
	if acc.RegionLen < uint64(size) {
		return fmt.Errorf("%w: receiver advertised %d bytes for a %d-byte tensor", bootstrap.ErrProtocol, acc.RegionLen, int64(size))
	}
	if acc.RegionAddr > math.MaxUint64-acc.RegionLen {
		return fmt.Errorf("%w: receiver advertised a %d-byte region at %#x, which wraps the address space", bootstrap.ErrProtocol, acc.RegionLen, acc.RegionAddr)
	}
	return nil
}
