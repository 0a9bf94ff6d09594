package sim

import "math/bits"

// eventQueue is the world's future-event list: a timing wheel for the near
// future and a 4-ary heap for the rest, merged on (time, sequence number).
//
// The wheel has wheelSize buckets of 2^bucketShift picoseconds each. An
// event goes on the wheel when its bucket lies less than wheelSize buckets
// after the current instant's bucket, so the wheel never holds two
// revolutions at once and its buckets, scanned cyclically from the current
// one, are in time order. A bucket holds its earliest event inline (most
// buckets hold one event, and the clock sweeps the bucket array in order,
// which the hardware prefetches) and the rest in an intrusive list of
// 32-byte nodes sorted by time, ties in scheduling order. New events
// almost always go at the list's tail; one that belongs further in is
// inserted in place if that takes a short walk, and otherwise appended and
// the bucket marked unsorted, to be sorted once its inline event is taken.
// A large fabric puts dozens of events in one bucket, but they are mostly
// of one instant (frames of one size at one rate end together), so with
// buckets this narrow lists rarely need an insertion or a sort (with
// 256 ps buckets the 1024-host fat tree of BenchmarkFatTreePermutation
// sorted 64 thousand buckets per run, and the run took 7% more
// instructions). A two-level bitmap finds the next non-empty bucket in a
// few word operations. Events further
// out (retry timers, long links) go to the heap. Both structures are O(1)
// or O(log n) without allocation once grown.
//
// Ties at one instant fire in the order they were scheduled, whichever
// structure holds them. Wheel events need no sequence number for that:
//   - within a bucket, order among equal times is scheduling order: a new
//     event displaces the inline one only if strictly earlier (the
//     displaced one then heads the list, before everything scheduled after
//     it), an in-place insertion goes after every equal time, and once a
//     list is unsorted every new event is appended, so the list is a
//     sorted prefix followed by later events in scheduling order, which a
//     stable sort on time alone puts in (time, sequence) order;
//   - between the structures, of two events due at the same instant the
//     heap's was always scheduled first: it went to the heap because its
//     bucket was at least wheelSize buckets ahead of the clock, the
//     wheel's because it was fewer, and the clock never goes back. So a
//     tie goes to the heap. The heap itself orders ties by sequence number.
type eventQueue struct {
	// The bucket array comes first: a World (a large allocation, so page
	// aligned) starts with its eventQueue, so buckets are line-aligned.
	bkt [wheelSize]bucket

	// wheel
	nodes  []node
	freeN  int32 // head of the free node list, -1 if none
	ndirty int32 // unsorted buckets
	wcount int
	keys   []sortKey // scratch for sorting a bucket
	sorts  uint64    // buckets sorted (for tests)

	// heap for the far future
	heapAt Time // heap[0].at, Forever when the heap is empty
	heap   []event
	slots  []Handler
	free1  []uint32

	// fixed-size arrays, indexed by masked bucket numbers: no bounds checks
	summ   [wordsPerMap / 64]uint64 // bitmap word non-zero
	bitmap [wordsPerMap]uint64      // bucket non-empty
	dirty  [wordsPerMap]uint64      // bucket list not sorted
}

const (
	bucketShift = 7 // 128 ps buckets
	maxWalk     = 4 // longest in-place insertion walk
	wheelBits   = 15
	wheelSize   = 1 << wheelBits // 4.2 µs horizon (1 MiB of buckets)
	wheelMask   = wheelSize - 1
	wordsPerMap = wheelSize / 64
)

// bucket is one wheel slot, 32 bytes: its earliest event (h nil when the
// bucket is empty) and a list of the others, sorted by time, ties in
// scheduling order.
type bucket struct {
	at         Time
	h          Handler
	head, tail int32 // the list; -1 when empty
}

// sortKey is a bucket entry being sorted.
type sortKey struct {
	at  Time
	idx int32
}

// node is one entry of a bucket's list: 32 bytes.
type node struct {
	at   Time
	h    Handler
	next int32
}

// event is one heap entry: 16 bytes, so that a node's four children share
// one cache line. key holds the sequence number in its high 40 bits and
// the index of the handler's slot in its low 24 bits.
type event struct {
	at  Time
	key uint64
}

const (
	slotBits = 24
	slotMask = 1<<slotBits - 1
	maxSeq   = 1<<(64-slotBits) - 1
)

func (e event) before(f event) bool {
	return e.at < f.at || (e.at == f.at && e.key < f.key)
}

func (q *eventQueue) init() {
	for i := range q.bkt {
		q.bkt[i].head, q.bkt[i].tail = -1, -1
	}
	q.nodes = make([]node, 0, 1024)
	q.freeN = -1
	q.keys = make([]sortKey, 0, 64)
	q.heapAt = Forever
	q.heap = make([]event, 0, 256)
	q.slots = make([]Handler, 0, 256)
}

func (q *eventQueue) len() int { return q.wcount + len(q.heap) }

// onWheel reports whether an event at instant at goes on the wheel
// (wheelPush) rather than the heap (heapPush, with its sequence number);
// now is the current instant.
func onWheel(now, at Time) bool {
	return uint64(at>>bucketShift)-uint64(now>>bucketShift) < wheelSize
}

func (q *eventQueue) wheelPush(at Time, h Handler) {
	q.wcount++
	b := int(at>>bucketShift) & wheelMask
	bk := &q.bkt[b]
	if bk.h == nil { // empty bucket
		bk.at, bk.h = at, h
		q.bitmap[b>>6] |= 1 << (b & 63)
		q.summ[b>>12] |= 1 << ((b >> 6) & 63)
		return
	}
	ni := q.freeN
	if ni >= 0 {
		q.freeN = q.nodes[ni].next
	} else {
		ni = q.newNode()
	}
	n := &q.nodes[ni]
	if at < bk.at {
		// the new event comes first: the inline one heads the list
		n.at, n.h, n.next = bk.at, bk.h, bk.head
		bk.at, bk.h, bk.head = at, h, ni
		if bk.tail < 0 {
			bk.tail = ni
		}
		return
	}
	n.at, n.h, n.next = at, h, -1
	t := bk.tail
	if t < 0 {
		bk.head, bk.tail = ni, ni
		return
	}
	if q.nodes[t].at <= at { // the usual case: append
		q.nodes[t].next = ni
		bk.tail = ni
		return
	}
	q.insert(bk, b, ni, at)
}

// newNode grows the node array by one node and returns its index.
func (q *eventQueue) newNode() int32 {
	ni := int32(len(q.nodes))
	q.nodes = append(q.nodes, node{})
	return ni
}

// insert links node ni, due at at, into bucket b's non-empty list whose
// tail is due later: in place if the list is sorted and the place is near
// its head (ties go last: every event already there was scheduled
// earlier), else at the tail, marking the list unsorted.
func (q *eventQueue) insert(bk *bucket, b int, ni int32, at Time) {
	w, bit := b>>6, uint64(1)<<(b&63)
	if q.dirty[w]&bit == 0 {
		prev := int32(-1)
		cur := bk.head
		for k := 0; k <= maxWalk; k++ {
			if q.nodes[cur].at > at {
				q.nodes[ni].next = cur
				if prev < 0 {
					bk.head = ni
				} else {
					q.nodes[prev].next = ni
				}
				return
			}
			prev, cur = cur, q.nodes[cur].next
		}
		// long list: append, sort when its turn comes
		q.dirty[w] |= bit
		q.ndirty++
	}
	q.nodes[bk.tail].next = ni
	bk.tail = ni
}

// firstBucket returns the earliest non-empty bucket, given that the wheel
// is not empty and every wheel event's bucket is less than wheelSize
// buckets after now's: the first non-empty bucket, scanning cyclically from
// now's. (pop has a copy of the fast path.)
func (q *eventQueue) firstBucket(now Time) int {
	c := int(now>>bucketShift) & wheelMask
	if m := q.bitmap[c>>6] & (^uint64(0) << (c & 63)); m != 0 {
		return c&^63 | bits.TrailingZeros64(m)
	}
	return q.firstBucketFar(c >> 6)
}

// firstBucketFar is firstBucket when the current bitmap word has nothing
// at or after now's bucket.
func (q *eventQueue) firstBucketFar(wi int) int {
	w := -1
	if wi+1 < wordsPerMap {
		w = q.nextWord(wi + 1)
	}
	if w < 0 {
		w = q.nextWord(0) // wrapped; may be wi itself (its low bits)
	}
	if w < 0 {
		panic("sim: BUG: event wheel count and bitmap disagree")
	}
	return w<<6 | bits.TrailingZeros64(q.bitmap[w])
}

// sortIfDirty sorts bucket b's list if it is marked unsorted.
func (q *eventQueue) sortIfDirty(b int) {
	if q.dirty[(b>>6)&(wordsPerMap-1)]&(1<<(b&63)) != 0 {
		q.sortBucket(b)
	}
}

// sortBucket sorts unsorted bucket b's list by time, stably (see
// eventQueue: list order among equal times is then scheduling order).
func (q *eventQueue) sortBucket(b int) {
	q.dirty[b>>6] &^= 1 << (b & 63)
	q.ndirty--
	q.sorts++
	bk := &q.bkt[b]
	keys := q.keys[:0]
	for i := bk.head; i >= 0; i = q.nodes[i].next {
		keys = append(keys, sortKey{at: q.nodes[i].at, idx: i})
	}
	// stable insertion sort: lists are short and mostly in order already
	for i := 1; i < len(keys); i++ {
		k := keys[i]
		j := i
		for j > 0 && keys[j-1].at > k.at {
			keys[j] = keys[j-1]
			j--
		}
		keys[j] = k
	}
	for i := 0; i < len(keys)-1; i++ {
		q.nodes[keys[i].idx].next = keys[i+1].idx
	}
	q.nodes[keys[len(keys)-1].idx].next = -1
	bk.head, bk.tail = keys[0].idx, keys[len(keys)-1].idx
	q.keys = keys[:0]
}

// nextWord returns the first non-empty bitmap word at or after from, -1 if
// none.
func (q *eventQueue) nextWord(from int) int {
	for s := from >> 6; s < len(q.summ); s++ {
		m := q.summ[s]
		if s == from>>6 {
			m &= ^uint64(0) << (from & 63)
		}
		if m != 0 {
			return s<<6 | bits.TrailingZeros64(m)
		}
	}
	return -1
}

// peek returns the earliest event's time; the queue must not be empty.
func (q *eventQueue) peek(now Time) Time {
	if q.wcount == 0 {
		return q.heapAt
	}
	return min(q.bkt[q.firstBucket(now)&wheelMask].at, q.heapAt)
}

// pop removes the earliest event; the queue must not be empty.
func (q *eventQueue) pop(now Time) (Time, Handler) {
	if q.wcount == 0 {
		return q.heapPop()
	}
	c := int(now>>bucketShift) & wheelMask
	var b int
	if m := q.bitmap[c>>6] & (^uint64(0) << (c & 63)); m != 0 {
		b = c&^63 | bits.TrailingZeros64(m)
	} else {
		b = q.firstBucketFar(c >> 6)
	}
	b &= wheelMask
	bk := &q.bkt[b]
	at := bk.at
	if q.heapAt <= at && len(q.heap) > 0 { // ties go to the heap
		return q.heapPop()
	}
	h := bk.h
	q.wcount--
	if bk.head < 0 {
		bk.h = nil
		w := b >> 6
		q.bitmap[w] &^= 1 << (b & 63)
		if q.bitmap[w] == 0 {
			q.summ[w>>6] &^= 1 << (w & 63)
		} else if m := q.bitmap[w] & (^uint64(0) << (b & 63)); m != 0 {
			// the next non-empty bucket in this word holds the next event
			prefetchHandler(q.bkt[(b&^63|bits.TrailingZeros64(m))&wheelMask].h)
		}
		return at, h
	}
	// the list's first event becomes the inline one
	if q.ndirty != 0 {
		q.sortIfDirty(b)
	}
	ni := bk.head
	n := &q.nodes[ni]
	bk.at, bk.h, bk.head = n.at, n.h, n.next
	if n.next < 0 {
		bk.tail = -1
	}
	n.next = q.freeN // n.h is overwritten on reuse (handlers outlive their events)
	q.freeN = ni
	// Software pipelining: the next event's frame (its port's wire line was
	// usually prefetched one event ago, as the event after the next), and
	// the port of the event after it. (The heap may hold an earlier event;
	// then the hints are wasted, never wrong.)
	prefetchFrame(bk.h)
	if bk.head >= 0 {
		prefetchHandler(q.nodes[bk.head].h)
	}
	return at, h
}

func (q *eventQueue) heapPush(at Time, seq uint64, h Handler) {
	if seq > maxSeq {
		panic("sim: BUG: event sequence number overflow (2^40 events)")
	}
	var slot uint32
	if n := len(q.free1); n > 0 {
		slot = q.free1[n-1]
		q.free1 = q.free1[:n-1]
		q.slots[slot] = h
	} else {
		slot = uint32(len(q.slots))
		if slot > slotMask {
			panic("sim: BUG: more than 16M far-future events")
		}
		q.slots = append(q.slots, h)
	}
	q.heap = append(q.heap, event{at: at, key: seq<<slotBits | uint64(slot)})
	q.up(len(q.heap) - 1)
	q.heapAt = q.heap[0].at
}

// up restores the heap order from index i towards the root.
func (q *eventQueue) up(i int) {
	h := q.heap
	e := h[i]
	for i > 0 {
		p := (i - 1) >> 2
		if !e.before(h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = e
}

// down restores the heap order from index i towards the leaves.
func (q *eventQueue) down(i int) {
	h := q.heap
	n := len(h)
	e := h[i]
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		mv := h[c]
		end := min(c+4, n)
		for j := c + 1; j < end; j++ {
			if v := h[j]; v.before(mv) {
				m, mv = j, v
			}
		}
		if !mv.before(e) {
			break
		}
		h[i] = mv
		i = m
	}
	h[i] = e
}

func (q *eventQueue) heapPop() (Time, Handler) {
	h := q.heap
	e := h[0]
	n := len(h) - 1
	h[0] = h[n]
	q.heap = h[:n]
	if n > 1 {
		q.down(0)
	}
	q.heapAt = Forever
	if n > 0 {
		q.heapAt = h[0].at
	}
	slot := uint32(e.key & slotMask)
	hd := q.slots[slot]
	q.slots[slot] = nil
	q.free1 = append(q.free1, slot)
	return e.at, hd
}
