package mptx

import (
	"context"
	"fmt"

	"github.com/mptx-dev/mptx/multipath"
)

// SendOptions are per-tensor options of SendWith and SendAsyncWith; the
// zero value is what Send and SendAsync use.
type SendOptions struct {
	// Priority is the tensor's class: 0 (multipath.PriorityDefault) to
	// multipath.MaxPriority (7). The session's engine hands out the chunks
	// of a higher class first, and a higher-class chunk sets a lower
	// one's unposted segments aside, so that a decode step's KV block
	// does not wait behind a weight shard sent on the same session;
	// lower classes still get a chunk once higher ones have been handed
	// multipath.Config.PriorityGuard bytes while they waited. Set
	// Config.Engine.Priorities on a session that will mix classes: the
	// default class then keeps a shallow send queue from the first
	// tensor, not only from the first higher-class one (see the
	// multipath package doc, "Priorities"). Only the sender uses it: the
	// receiver sees the tensor as any other.
	Priority multipath.Priority
}

func (o *SendOptions) validate(name string) error {
	if o.Priority > multipath.MaxPriority {
		return fmt.Errorf("mptx: tensor %q: SendOptions.Priority = %d (valid: 0..%d, 0 the default, higher served first)", name, o.Priority, multipath.MaxPriority)
	}
	return nil
}

// SendWith is Send with options (a priority class).
func (s *Session) SendWith(ctx context.Context, name string, data []byte, opts SendOptions) error {
	t, err := s.SendAsyncWith(ctx, name, data, opts)
	if err != nil {
		return err
	}
	<-t.done
	return t.Err()
}

// SendAsyncWith is SendAsync with options (a priority class).
func (s *Session) SendAsyncWith(ctx context.Context, name string, data []byte, opts SendOptions) (*Transfer, error) {
	if err := opts.validate(name); err != nil {
		return nil, err
	}
	return s.sendAsync(ctx, name, data, opts)
}
