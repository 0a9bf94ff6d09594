package multipath

import "fmt"

func (e *Engine) dump() string {
	s := fmt.Sprintf("pending %d (%d B) live %d\n", e.pendingN, e.pending, len(e.active))
	for i := range e.paths {
		p := &e.paths[i]
		s += fmt.Sprintf("  path %d %v active=%v inflight=%d wrOut=%d win=%d blocked=%v rateEst=%v srtt=%v fifo=%d\n", i, p.state, p.hasActive, p.inflight, p.wrOut, e.window(p), p.blockedUntil, p.rateEst, p.srtt, p.fifoLen)
	}
	for _, s2 := range e.active {
		t := &e.transfers[s2]
		cnt := map[chunkStatus]int{}
		for _, c := range t.chunks {
			cnt[c.status]++
		}
		s += fmt.Sprintf("  transfer %d done %d/%d nextFresh %d req %d statuses %v\n", t.id, t.done, t.plan.Count, t.nextFresh, t.reqHead, cnt)
	}
	return s
}
