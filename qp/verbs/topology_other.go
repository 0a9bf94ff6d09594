//go:build !linux

package verbs

import (
	"fmt"

	"github.com/mptx-dev/mptx/qp"
)

// ReadAddrs reads netdev addresses through netlink, which exists on
// Linux only.
func (t *Topology) ReadAddrs() error {
	return fmt.Errorf("verbs: netdev addresses: %w (netlink is Linux only)", qp.ErrNotSupported)
}
