// Topology tiers: which paths may take new chunks (PathConfig.Tier).

package multipath

import (
	"slices"
	"time"

	"github.com/mptx-dev/mptx/vtime"
)

// defaultSpillRTTs is Config.TierSpill's default in round trips.
const defaultSpillRTTs = 4

// initTiers groups the paths by tier (lowest first); an engine whose paths
// share one tier skips the tier logic altogether.
func (e *Engine) initTiers() {
	var ts []int
	for _, p := range e.cfg.Paths {
		if !slices.Contains(ts, p.Tier) {
			ts = append(ts, p.Tier)
		}
	}
	slices.Sort(ts)
	if len(ts) < 2 {
		return
	}
	e.tiered = true
	e.tierSets = make([]pathSet, len(ts))
	e.tierUpTo = make([]pathSet, len(ts))
	for i, p := range e.cfg.Paths {
		k := slices.Index(ts, p.Tier)
		e.paths[i].tierIdx = uint8(k)
		e.tierSets[k] |= bitOf(i)
	}
	var acc pathSet
	for k, s := range e.tierSets {
		acc |= s
		e.tierUpTo[k] = acc
	}
}

// tierAllowed returns the paths that may take the next chunk, given cand,
// the paths that could take it now (free, or preemptable by its class),
// and moves the open tier: the lowest tier with an up path is always open;
// the next one opens once no path of the open tiers could take a chunk for
// the spill delay (a tier with no path up is skipped at once), and the open tiers
// close back to the lowest one with a candidate as soon as it has one.
// A spill under way is a deadline (spillAt; vtime.Never for none), which
// matters only while chunks wait: addPending drops it when none does.
func (e *Engine) tierAllowed(now vtime.Time, cand pathSet) pathSet {
	lowest := e.nextUpTier(0)
	if lowest < 0 {
		e.spillAt = vtime.Never
		return e.all
	}
	if e.tierOpen < lowest {
		e.tierOpen = lowest
	}
	// A lower tier has room again: it takes the chunks, the tiers above
	// it get no new ones.
	for k := lowest; k < e.tierOpen; k++ {
		if cand&e.tierSets[k] != 0 {
			e.tierOpen, e.spillAt = k, vtime.Never
			break
		}
	}
	for cand&e.tierUpTo[e.tierOpen] == 0 {
		next := e.nextUpTier(e.tierOpen + 1)
		if next < 0 {
			e.spillAt = vtime.Never
			break
		}
		// The open tiers have a path up (the lowest open one does) but
		// no room: wait out the spill delay first.
		if e.spillAt == vtime.Never {
			e.spillAt = now.Add(e.spillDelay())
		}
		if now < e.spillAt {
			break
		}
		e.tierOpen, e.spillAt = next, vtime.Never
	}
	if cand&e.tierUpTo[e.tierOpen] != 0 {
		e.spillAt = vtime.Never
	}
	return e.tierUpTo[e.tierOpen]
}

// nextUpTier returns the lowest tier index >= k with a path up, -1 if none.
func (e *Engine) nextUpTier(k int) int {
	for ; k < len(e.tierSets); k++ {
		if e.tierSets[k]&e.up != 0 {
			return k
		}
	}
	return -1
}

// spillDelay is how long the open tiers must have had no room before the
// next tier opens: Config.TierSpill, by default defaultSpillRTTs round
// trips of the open tiers' slowest up path (its smoothed RTT, or its
// BaseRTT before the first sample).
func (e *Engine) spillDelay() time.Duration {
	if e.cfg.TierSpill != 0 {
		return max(e.cfg.TierSpill, 0)
	}
	var rtt time.Duration
	for m := e.tierUpTo[e.tierOpen] & e.up; m != 0; m &= m - 1 {
		p := &e.paths[m.first()]
		r := p.srtt
		if r == 0 {
			r = p.cfg.BaseRTT
		}
		rtt = max(rtt, r)
	}
	return defaultSpillRTTs * rtt
}

// lowestUsableTier returns the paths of the lowest tier with a usable
// path (all paths when the engine has one tier): the paths a new transfer
// is planned for.
func (e *Engine) lowestUsableTier() pathSet {
	if !e.tiered {
		return e.all
	}
	for _, s := range e.tierSets {
		for m := s; m != 0; m &= m - 1 {
			if e.paths[m.first()].state.usable() {
				return s
			}
		}
	}
	return e.all
}
