package analyze

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/mptx-dev/mptx/telemetry/schema"
)

// Filter selects transfers. The zero value selects every transfer; each
// set field narrows the selection (all must hold).
type Filter struct {
	// Outcomes keeps transfers whose outcome, at either end, is one of
	// these: done, failed, abandoned, incomplete (no mptx.transfer span),
	// receiver-only (receiver spans only).
	Outcomes []string
	// MinDuration and MaxDuration bound the transfer's completion time
	// (the sender's; the receiver's for receiver-only ones); zero means
	// no bound.
	MinDuration, MaxDuration time.Duration
	// Peer, Name and Service are shell patterns (path.Match: *, ?, [...])
	// matched against the peer address (network.peer.address, either
	// end's), the transfer's name (mptx.transfer.name) and the service
	// (service.name, either end's).
	Peer, Name, Service string
	// Since and Until keep transfers that started in [Since, Until); zero
	// means unbounded.
	Since, Until time.Time
	// IDs keeps only these transfer ids (empty: all).
	IDs []int64
}

// Outcome values a Filter accepts.
var FilterOutcomes = []string{schema.TransferDone, schema.TransferFailed, schema.TransferAbandoned, "incomplete", "receiver-only"}

// Validate checks the filter's fields; errors name the field, the value
// and what is valid.
func (f *Filter) Validate() error {
	for _, o := range f.Outcomes {
		if !slices.Contains(FilterOutcomes, o) {
			return fmt.Errorf("analyze: outcome %q: valid: %s", o, strings.Join(FilterOutcomes, ", "))
		}
	}
	if f.MinDuration < 0 || f.MaxDuration < 0 || (f.MaxDuration > 0 && f.MaxDuration < f.MinDuration) {
		return fmt.Errorf("analyze: duration range [%v, %v]: want 0 <= min <= max (0 max: no bound)", f.MinDuration, f.MaxDuration)
	}
	for _, p := range []struct{ name, pat string }{{"peer", f.Peer}, {"name", f.Name}, {"service", f.Service}} {
		if p.pat == "" {
			continue
		}
		if _, err := path.Match(p.pat, ""); err != nil {
			return fmt.Errorf("analyze: %s pattern %q: %v (want a shell pattern: *, ?, [...])", p.name, p.pat, err)
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		return fmt.Errorf("analyze: time range [%v, %v): want since before until", f.Since, f.Until)
	}
	return nil
}

// Match reports whether t is selected. The receiver's view, when present,
// can satisfy the outcome, peer and service conditions.
func (f *Filter) Match(t *Transfer) bool {
	rv := t.Receiver
	if len(f.Outcomes) > 0 {
		ok := slices.Contains(f.Outcomes, t.Outcome)
		if !ok && rv != nil {
			ok = slices.Contains(f.Outcomes, rv.Outcome)
		}
		if !ok {
			return false
		}
	}
	if f.MinDuration > 0 && t.Completion < f.MinDuration {
		return false
	}
	if f.MaxDuration > 0 && t.Completion > f.MaxDuration {
		return false
	}
	either := func(pat, a, b string) bool {
		if pat == "" {
			return true
		}
		if ok, _ := path.Match(pat, a); ok {
			return true
		}
		ok, _ := path.Match(pat, b)
		return ok && b != ""
	}
	var rPeer, rService string
	if rv != nil {
		rPeer, rService = rv.Peer, rv.Service
	}
	if !either(f.Peer, t.Peer, rPeer) || !either(f.Service, t.Service, rService) || !either(f.Name, t.Name, "") {
		return false
	}
	if !f.Since.IsZero() && t.Start.Before(f.Since) {
		return false
	}
	if !f.Until.IsZero() && !t.Start.Before(f.Until) {
		return false
	}
	if len(f.IDs) > 0 && !slices.Contains(f.IDs, t.ID) {
		return false
	}
	return true
}

// decide is Match for a transfer whose receiver's part may still come:
// final is false when t does not match but its receiver's part (outcome,
// peer, service) still could make it.
func (f *Filter) decide(t *Transfer) (match, final bool) {
	if f.Match(t) {
		return true, true
	}
	if t.Receiver != nil || t.Outcome == "receiver-only" {
		return false, true
	}
	// Would a receiver's part that satisfies every receiver-side
	// condition select it?
	g := *f
	g.Outcomes, g.Peer, g.Service = nil, "", ""
	return false, !g.Match(t)
}

// Failed reports whether t failed at either end (failed or abandoned).
func (t *Transfer) Failed() bool {
	bad := func(o string) bool { return o == schema.TransferFailed || o == schema.TransferAbandoned }
	return bad(t.Outcome) || (t.Receiver != nil && bad(t.Receiver.Outcome))
}
