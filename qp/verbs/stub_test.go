//go:build !linux || !cgo

package verbs

import (
	"errors"
	"testing"

	"github.com/mptx-dev/mptx/qp"
)

func TestStubNotSupported(t *testing.T) {
	if _, err := OpenHost(HostConfig{}); !errors.Is(err, qp.ErrNotSupported) {
		t.Errorf("OpenHost = %v, want an error wrapping qp.ErrNotSupported", err)
	}
	if _, err := Devices(); !errors.Is(err, qp.ErrNotSupported) {
		t.Errorf("Devices = %v, want qp.ErrNotSupported", err)
	}
	if Supported {
		t.Error("Supported = true in the stub build")
	}
}
