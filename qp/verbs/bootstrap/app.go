package bootstrap

import (
	"context"
	"fmt"
)

// TypeApp is the first frame type left to the layer above the bootstrap
// (mptx sessions, which share this authenticated control channel between
// the verbs and TCP transports). The bootstrap itself never sends a type
// at or above it; WriteApp and ReadApp move such frames uninterpreted.
const TypeApp Type = 64

// WriteApp sends one application frame of type t (>= TypeApp) carrying
// payload (at most MaxPayload bytes). Like every send it may be called from
// several goroutines; frames are serialised.
func (s *Session) WriteApp(ctx context.Context, t Type, payload []byte) error {
	if t < TypeApp {
		return fmt.Errorf("bootstrap: WriteApp: type %d is the bootstrap's own (valid: %d..255)", t, TypeApp)
	}
	return s.writeFrame(ctx, t, payload)
}

// ReadApp reads the next frame, authenticated, and returns its type and
// payload uninterpreted. An Abort frame yields ErrAborted with the peer's
// reason; any other bootstrap frame type is returned as it is, for the
// caller to refuse. Receives must come from one goroutine.
func (s *Session) ReadApp(ctx context.Context) (Type, []byte, error) {
	t, payload, err := s.readFrame(ctx)
	if err != nil {
		return 0, nil, err
	}
	if t == TypeAbort {
		d := &dec{b: payload}
		return t, nil, fmt.Errorf("%w: %s", ErrAborted, d.str())
	}
	return t, payload, nil
}
