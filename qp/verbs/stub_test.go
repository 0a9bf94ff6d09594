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
	if err := Usable(HostConfig{}); !errors.Is(err, qp.ErrNotSupported) {
		t.Errorf("Usable = %v, want qp.ErrNotSupported", err)
	}
	var h *Host
	if _, err := h.DialSession(nil, nil, DialConfig{}); !errors.Is(err, qp.ErrNotSupported) {
		t.Errorf("DialSession = %v, want qp.ErrNotSupported", err)
	}
	if _, err := h.AcceptSession(nil, nil, nil, ListenConfig{}); !errors.Is(err, qp.ErrNotSupported) {
		t.Errorf("AcceptSession = %v, want qp.ErrNotSupported", err)
	}
	if Supported {
		t.Error("Supported = true in the stub build")
	}
}
