package sim

import "unsafe"

// prefetchHandler starts loading what the handler of the next event will
// touch first, while the current event runs: the event loop is bound by
// cache misses (hundreds of thousands of packets in flight, thousands of
// ports), and a miss that overlaps the current event's work costs little.
// A port's delivery event reads the port's wire line, then the frame at
// the head of the wire; its transmit event reads the port's first line.
func prefetchHandler(h Handler) {
	// unsafe.Add rather than &e.pipe: taking a field's address makes the
	// compiler check e against nil with a load, which waits for the very
	// miss the prefetch is meant to hide.
	switch e := h.(type) {
	case *portPipe:
		prefetch(unsafe.Add(unsafe.Pointer(e), unsafe.Offsetof(Port{}.pipe)))
	case *Port:
		prefetch(unsafe.Pointer(e))
	}
}

// prefetchFrame starts loading the frame a delivery event will deliver. It
// reads the port's wire line: best called once that line has been
// prefetched (prefetchHandler).
func prefetchFrame(h Handler) {
	if e, ok := h.(*portPipe); ok {
		if f := e.pipe.head; f != nil {
			prefetch(unsafe.Pointer(f))
		}
	}
}
