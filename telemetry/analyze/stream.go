package analyze

// sink receives what a stream finalizes.
type sink interface {
	// transfer delivers a transfer whose sender part ended (its
	// mptx.transfer span arrived), or, at the end of the input, one seen
	// only in part. t.Receiver is set when the receiver's part ended
	// first.
	transfer(t *Transfer)
	// lateReceiver delivers the receiver's part of a transfer already
	// delivered.
	lateReceiver(k key, rv *ReceiverView)
}

// stream groups span records by transfer and finalizes each transfer as
// soon as its spans are in, so that memory holds the transfers in flight
// in the input rather than all of them.
//
// A transfer's sender part is final when its mptx.transfer span arrives:
// the recorder ends and exports it after every chunk span of the transfer,
// so in a file its chunk spans come first. The receiver's part is final
// when its mptx.receive span arrives, likewise. Finalization happens after
// the batch (one input line: one export request, or one Jaeger response
// holding whole traces) that completes the part, so spans sharing that
// line are never late. The two parts are joined by (trace id, transfer
// id) whichever comes first. Chunk spans arriving after their transfer
// was finalized are counted (late) and otherwise ignored; transfers whose
// mptx.transfer span never arrives are delivered at close as
// "incomplete", and receiver parts without any sender span as
// "receiver-only".
type stream struct {
	opt      Options
	sink     sink
	builders map[key]*builder
	order    []key // builders in creation order, for a deterministic close
	closedS  []key // sender parts completed in the current batch
	closedR  []key // receiver parts completed in the current batch
	emitted  map[key]struct{}
	free     []*builder // dropped builders, for reuse

	records int64 // mptx spans seen
	dups    int64 // duplicate spans dropped
	late    int64 // sender spans after their transfer was finalized
}

func newStream(opt Options, s sink) *stream {
	return &stream{opt: opt, sink: s, builders: map[key]*builder{}, emitted: map[key]struct{}{}}
}

// add adds one batch of records and finalizes what it completed.
func (st *stream) add(recs []spanRec) {
	for i := range recs {
		r := &recs[i]
		st.records++
		k := key{r.trace, r.id}
		sender := r.kind == recTransfer || r.kind == recChunk
		if _, done := st.emitted[k]; done && sender {
			st.late++
			continue
		}
		b := st.builders[k]
		if b == nil {
			b = st.newBuilder(k)
			st.builders[k] = b
			st.order = append(st.order, k)
		}
		if !b.add(r) {
			st.dups++
			continue
		}
		switch r.kind {
		case recTransfer:
			st.closedS = append(st.closedS, k)
		case recReceive:
			st.closedR = append(st.closedR, k)
		}
	}
	for _, k := range st.closedR {
		b := st.builders[k]
		if b == nil || b.recv == nil {
			continue
		}
		rv := b.finishReceiver()
		if _, done := st.emitted[k]; done {
			st.sink.lateReceiver(k, rv)
			st.drop(k)
			continue
		}
		b.rv = rv
	}
	for _, k := range st.closedS {
		b := st.builders[k]
		if b == nil || !b.hasSpan {
			continue
		}
		st.emit(k, b)
	}
	st.closedS, st.closedR = st.closedS[:0], st.closedR[:0]
	if len(st.order) > 4*len(st.builders)+1024 { // compact the order list
		live := st.order[:0]
		for _, k := range st.order {
			if st.builders[k] != nil {
				live = append(live, k)
			}
		}
		st.order = live
	}
}

// emit finalizes b's sender part and delivers it.
func (st *stream) emit(k key, b *builder) {
	t := b.finish(st.opt)
	if b.recv != nil { // a receive span that arrived without its batch closing it
		b.rv = b.finishReceiver()
	}
	if b.rv != nil {
		attach(t, b.rv, st.opt)
	}
	st.emitted[k] = struct{}{}
	st.drop(k)
	st.sink.transfer(t)
}

// drop forgets k's builder and keeps it for reuse: its map and slices
// keep their capacity, so a stream of transfers of similar size stops
// allocating them.
func (st *stream) drop(k key) {
	b := st.builders[k]
	if b == nil {
		return
	}
	delete(st.builders, k)
	if len(st.free) < 64 {
		clear(b.seen)
		clear(b.attempts)
		*b = builder{seen: b.seen, attempts: b.attempts[:0], recvParts: b.recvParts[:0]}
		st.free = append(st.free, b)
	}
}

func (st *stream) newBuilder(k key) *builder {
	var b *builder
	if n := len(st.free); n > 0 {
		b = st.free[n-1]
		st.free = st.free[:n-1]
	} else {
		b = &builder{}
	}
	b.t = &Transfer{TraceID: k.trace.String(), ID: k.id, key: k}
	return b
}

// close delivers everything left: transfers without a mptx.transfer span
// (incomplete) and receiver parts without a sender part.
func (st *stream) close() {
	for _, k := range st.order {
		b := st.builders[k]
		if b == nil {
			continue
		}
		if b.hasSender() {
			st.emit(k, b)
			continue
		}
		rv := b.rv
		if b.recv != nil {
			rv = b.finishReceiver()
		}
		if rv == nil { // receiver chunk spans only: nothing to report
			st.drop(k)
			continue
		}
		if _, done := st.emitted[k]; done {
			st.sink.lateReceiver(k, rv)
			st.drop(k)
			continue
		}
		t := b.t
		t.Outcome = "receiver-only"
		t.Service = rv.Service
		t.Start = rv.Start
		t.Completion = rv.Duration
		t.Error = rv.Error
		t.Stragglers = []Straggler{}
		t.StragglerFactor = st.opt.StragglerFactor
		t.Receiver = rv
		st.emitted[k] = struct{}{}
		st.drop(k)
		st.sink.transfer(t)
	}
	st.order = nil
}
