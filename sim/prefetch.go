package sim

import "unsafe"

// prefetchHandler starts loading what the handler of the next event will
// touch first, while the current event runs: the event loop is bound by
// cache misses (hundreds of thousands of packets in flight, thousands of
// ports), and a miss that overlaps the current event's work costs little.
// A port's delivery event reads the port's wire line, then the frame at
// the head of the wire; its transmit event reads the port's first line.
func prefetchHandler(h Handler) {
	switch e := h.(type) {
	case *portPipe:
		prefetch(unsafe.Pointer(&e.pipe))
	case *Port:
		prefetch(unsafe.Pointer(e))
	}
}
