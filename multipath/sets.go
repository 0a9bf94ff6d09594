// Path sets: what lets a round touch only the paths whose state changed.
//
// A round (one completion or timer, then Actions and Deadline) used to scan
// every path several times: Actions visited each path twice, probes, fences
// and the hardware rate updates each looped over all of them, and Deadline
// asked every path's CC for its deadline and looked up its oldest work
// request: with 8 paths, half of a round's instructions. The engine now
// keeps, as bit masks over path indices (MaxPaths = 64 fits one word):
//
//   - up and busy: the paths in PathUp and the paths with an active chunk,
//     maintained wherever state or hasActive change (setState, setActive);
//     path choice starts from up &^ busy.
//   - recheck: the paths Actions must visit. A visit clears the path's bit;
//     anything that can let a path post again sets it: a completion or reset
//     on it (window, send queue), a new active chunk, a return to PathUp, a
//     window or segment change (refreshRate), a full action buffer, and a
//     work-request table that was exhausted getting a free entry (every path).
//     A path held back by pacing is in paced until its blockedUntil passes.
//     Skipping a path whose bit is clear is exact: visiting it would find it
//     unable to post, as it was at its last visit.
//   - freeSet: the paths free to take a chunk (Engine.free), recomputed for
//     the paths in freeDirty, which is marked with dirty (mark).
//   - dirty: the paths whose cached deadline (dlTree) must be recomputed,
//     marked wherever an input of pathDeadline changes (CC calls through
//     refreshRate, work requests posted or completed, state, probes, pacing
//     blocks). Deadline recomputes only those; OnTimer visits only the paths
//     whose deadline is due.
//   - fenceSet and hwSet: the paths owing an ActReset or an ActSetRate.
//
// Every set is iterated in the order the full scans had (increasing path
// index; the recheck set round-robin from rrPath, as Actions went), so the
// actions and events are the same as before, line for line
// (TestGoldenTraces), and TestCachedStateMatches checks the caches against
// a full recomputation after every step of randomized runs.

package multipath

import (
	"math/bits"

	"github.com/mptx-dev/mptx/vtime"
)

// pathSet is a set of path indices.
type pathSet uint64

// bitOf returns the set holding path i alone.
func bitOf(i int) pathSet { return 1 << (uint(i) & 63) }

// first returns the lowest path index in s (s != 0).
func (s pathSet) first() int { return bits.TrailingZeros64(uint64(s)) }

// count returns the number of paths in s.
func (s pathSet) count() int { return bits.OnesCount64(uint64(s)) }

// nth returns the k-th lowest path index in s (0 <= k < s.count()).
func (s pathSet) nth(k int) int {
	for ; k > 0; k-- {
		s &= s - 1
	}
	return s.first()
}

// allPaths returns the set of paths 0..n-1.
func allPaths(n int) pathSet { return pathSet(^uint64(0) >> uint(64-n)) }

// rotated returns s seen from path start of n: bit k is path (start+k) mod n.
func rotated(s pathSet, start, n int, all pathSet) uint64 {
	if start == 0 {
		return uint64(s)
	}
	x := uint64(s)
	return (x>>uint(start) | x<<uint(n-start)) & uint64(all)
}

// mark records that the paths in b changed: their deadlines and whether
// they are free to take a chunk must be recomputed.
func (e *Engine) mark(b pathSet) {
	e.dirty |= b
	e.freeDirty |= b
}

// touch marks path i for a visit by Actions, a new deadline and a new
// free test.
func (e *Engine) touch(i int) {
	b := bitOf(i)
	e.recheck |= b
	e.mark(b)
}

// setState moves path i to state s.
func (e *Engine) setState(i int, s PathState) {
	e.paths[i].state = s
	b := bitOf(i)
	if s == PathUp {
		e.up |= b
		e.recheck |= b
	} else {
		e.up &^= b
	}
	e.mark(b)
}

// setActive records whether path i has an active chunk.
func (e *Engine) setActive(i int, active bool) {
	e.paths[i].hasActive = active
	b := bitOf(i)
	if active {
		e.busy |= b
		e.recheck |= b
	} else {
		e.busy &^= b
	}
	e.mark(b)
}

// pathDeadline computes path i's deadline: its CC's timer, its quarantine
// end (before a probe), its pacing wake-up and the stall timeout of its
// oldest work request or, with ProbeInterval, its next idle probe.
func (e *Engine) pathDeadline(i int) vtime.Time {
	p := &e.paths[i]
	d := p.alg.Deadline()
	switch p.state {
	case PathQuarantined, PathDead:
		if p.probeID == 0 {
			d = vtime.Earliest(d, p.until)
		}
	case PathUp:
		if p.hasActive && p.blockedUntil != 0 {
			d = vtime.Earliest(d, p.blockedUntil)
		}
		if id, ok := e.oldest(p); ok {
			d = vtime.Earliest(d, e.work[int(uint32(id))-1].postAt.Add(e.timeout(p)))
		} else if e.cfg.ProbeInterval > 0 && p.probeID == 0 {
			d = vtime.Earliest(d, p.lastProbe.Add(e.cfg.ProbeInterval))
		}
	}
	return d
}

// refreshDeadlines recomputes the cached deadlines of the dirty paths.
func (e *Engine) refreshDeadlines() {
	for m := e.dirty; m != 0; m &= m - 1 {
		i := m.first()
		e.setDeadline(i, e.pathDeadline(i))
	}
	e.dirty = 0
}

// The cached deadlines live in a min-tree (a tournament tree) over the
// paths: leaf dlSize+i holds path i's deadline (vtime.Never for none), each
// inner node the earliest of its two children, the root the engine's
// deadline. A path's new deadline costs log2(paths) steps, not a scan of
// every path, so a round stays flat in the number of paths.

// setDeadline records path i's deadline d (0: none).
func (e *Engine) setDeadline(i int, d vtime.Time) {
	if d == 0 {
		d = vtime.Never
	}
	j := e.dlSize + i
	if e.dlTree[j] == d {
		return
	}
	e.dlTree[j] = d
	for j > 1 {
		j >>= 1
		m := min(e.dlTree[2*j], e.dlTree[2*j+1])
		if e.dlTree[j] == m {
			break
		}
		e.dlTree[j] = m
	}
}

// pathDeadlineCached returns path i's cached deadline (0: none).
func (e *Engine) pathDeadlineCached(i int) vtime.Time {
	if d := e.dlTree[e.dlSize+i]; d != vtime.Never {
		return d
	}
	return 0
}

// due adds to s the paths under tree node j whose cached deadline is at or
// before now.
func (e *Engine) due(now vtime.Time, j int, s *pathSet) {
	if e.dlTree[j] > now {
		return
	}
	if j >= e.dlSize {
		*s |= bitOf(j - e.dlSize)
		return
	}
	e.due(now, 2*j, s)
	e.due(now, 2*j+1, s)
}
