//go:build !linux || !cgo

package mptx

import (
	"context"
	"fmt"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
)

// The build without libibverbs (not Linux, or CGO_ENABLED=0): verbsUsable
// says so (verbs.Usable fails with qp.ErrNotSupported), auto always means
// TCP, and these are never reached; they fail as package verbs does.

func dialVerbs(context.Context, *bootstrap.Session, *Config) (link, error) {
	return link{}, fmt.Errorf("mptx: sessions over verbs: %w", qp.ErrNotSupported)
}

func acceptVerbs(context.Context, *bootstrap.Session, *Config) (link, error) {
	return link{}, fmt.Errorf("%w: sessions over verbs: %w", errNoWelcome, qp.ErrNotSupported)
}
