package sim

import "unsafe"

// prefetchHandler starts loading what the handler of the next event will
// touch first, while the current event runs: the event loop is bound by
// cache misses (hundreds of thousands of packets in flight, thousands of
// ports), and a miss that overlaps the current event's work costs little.
// A port's delivery event reads the port's wire line, then the frame at
// the head of the wire; its transmit event reads the port's first line
// and its transmission line (the serialiser and the control queue).
func prefetchHandler(h Handler) {
	// unsafe.Add rather than &e.pipe: taking a field's address makes the
	// compiler check e against nil with a load, which waits for the very
	// miss the prefetch is meant to hide.
	switch e := h.(type) {
	case *portPipe:
		prefetch(unsafe.Add(unsafe.Pointer(e), unsafe.Offsetof(Port{}.pipe)))
	case *Port:
		prefetch2(unsafe.Pointer(e), unsafe.Add(unsafe.Pointer(e), unsafe.Offsetof(Port{}.ser)))
	}
}

// prefetchFrame starts loading the frame a delivery event will deliver,
// or the frame a transmit event will most likely start (the head of the
// control queue, else of the data queue; a NIC port's arbiter instead). It
// reads the port's lines that prefetchHandler loads: best called once
// they have arrived.
func prefetchFrame(h Handler) {
	switch e := h.(type) {
	case *portPipe:
		if f := e.pipe.head; f != nil {
			prefetch(unsafe.Pointer(f))
		}
	case *Port:
		if f := e.ctrl.head; f != nil {
			prefetch(unsafe.Pointer(f))
		} else if f := e.data.head; f != nil {
			prefetch(unsafe.Pointer(f))
		} else if e.nic != nil {
			prefetch(unsafe.Pointer(e.nic))
		}
	}
}
