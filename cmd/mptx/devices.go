package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/verbs"
)

func init() {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "devices",
		Short: "List RDMA devices: ports, state, link layer, MTU, speed, netdev, NUMA node and RoCEv2 GIDs",
		Long: `devices lists the RDMA devices libibverbs sees (ibv_get_device_list), joined
with rdma netlink (` + "`rdma link show`" + `) and sysfs: one row per RoCEv2 GID of every
port, with the port's state, link layer, active MTU, speed, netdev and NUMA
node. These are the names mptx send/recv take in --devices.`,
		Example: `  mptx devices
  mptx devices --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			devs, err := verbs.Devices()
			if err != nil {
				if errors.Is(err, qp.ErrNotSupported) {
					return fmt.Errorf("%w (this mptx was built without libibverbs)", err)
				}
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if devs == nil {
					devs = []verbs.Device{}
				}
				return enc.Encode(devs)
			}
			if len(devs) == 0 {
				fmt.Fprintln(w, "no RDMA devices (no RDMA driver loaded, or this kernel has none).")
				fmt.Fprintln(w, "Soft-RoCE on an Ethernet interface: rdma link add rxe0 type rxe netdev eth0")
				return nil
			}
			return verbs.WriteTable(w, devs)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the devices as JSON")
	addCommand(cmd)
}
