//go:build linux && cgo

package verbs

import (
	"errors"
	"os"
	"testing"

	"github.com/mptx-dev/mptx/qp"
)

// TestNoDeviceHere: on a host without RDMA devices (this dev/CI machine's
// kernel has no RDMA support), enumeration is empty and OpenHost fails
// with ErrNoDevice, which callers see as qp.ErrNotSupported.
func TestNoDeviceHere(t *testing.T) {
	if os.Getenv("MPTX_RXE_VM") != "" {
		t.Skip("devices exist in the VM")
	}
	devs, err := Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) > 0 {
		t.Skipf("this host has RDMA devices (%d)", len(devs))
	}
	_, err = OpenHost(HostConfig{})
	if !errors.Is(err, ErrNoDevice) || !errors.Is(err, qp.ErrNotSupported) {
		t.Fatalf("OpenHost = %v, want ErrNoDevice wrapping qp.ErrNotSupported", err)
	}
	t.Logf("OpenHost here: %v", err)
	if err := Usable(HostConfig{}); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("Usable = %v, want ErrNoDevice", err)
	}
	if err := Usable(HostConfig{Devices: []string{"mlx5_0"}}); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("Usable(mlx5_0) = %v, want ErrNoDevice naming the device", err)
	}
}
