package sim

import (
	"testing"
	"unsafe"
)

// TestHotLayout pins the memory layout the event loop's speed depends on:
// a Packet is one cache line, a Port's hot field groups each start a line
// (see Port), and the pool and the port slabs hand out line-aligned
// elements. A failure here is a performance regression, not a bug.
func TestHotLayout(t *testing.T) {
	if s := unsafe.Sizeof(Packet{}); s != 64 {
		t.Errorf("Packet is %d bytes; want 64 (one cache line)", s)
	}
	var p Port
	for _, c := range []struct {
		name       string
		size, want uintptr
	}{
		{"Port", unsafe.Sizeof(p), 0},
		{"QP", unsafe.Sizeof(QP{}), 0},
		{"Switch", unsafe.Sizeof(Switch{}), 384},
		{"NIC", unsafe.Sizeof(NIC{}), 256},
	} {
		if c.size%64 != 0 || (c.want != 0 && c.size != c.want) {
			t.Errorf("%s is %d bytes; want a multiple of 64 (a line-aligned size class or slab)", c.name, c.size)
		}
	}
	for _, f := range []struct {
		name   string
		off    uintptr
		line   uintptr
		starts bool
	}{
		{"busyUntil", unsafe.Offsetof(p.busyUntil), 0, true},
		{"intOn", unsafe.Offsetof(p.intOn), 0, false},
		{"w", unsafe.Offsetof(p.w), 1, true},
		{"lossy", unsafe.Offsetof(p.lossy), 1, false},
		{"ser", unsafe.Offsetof(p.ser), 2, true},
		{"remote", unsafe.Offsetof(p.remote), 2, false},
		{"qBytes", unsafe.Offsetof(p.qBytes), 3, true},
		{"txData", unsafe.Offsetof(p.txData), 3, false},
		{"ecn", unsafe.Offsetof(p.ecn), 4, true},
		{"OnMark", unsafe.Offsetof(p.OnMark), 4, false},
		{"inBytes", unsafe.Offsetof(p.inBytes), 5, true},
		{"inPaused", unsafe.Offsetof(p.inPaused), 5, false},
	} {
		// (QP, NIC and Switch group their hot fields the same way; a
		// misplaced field there costs a line, checked by profile.)
		if f.off/64 != f.line || (f.starts && f.off%64 != 0) {
			t.Errorf("Port.%s at offset %d; want it in line %d (starting it: %v)", f.name, f.off, f.line, f.starts)
		}
	}

	w := NewWorld(1)
	n := NewNetwork(w)
	s, err := n.AddSwitch("s", SwitchConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		h, err := n.AddHost("h"+string(rune('0'+i)), 1, NICConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Link(h.NIC(0), s, LinkConfig{Rate: 100e9, Delay: Microsecond}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range s.Ports() {
		if a := uintptr(unsafe.Pointer(p)) % 64; a != 0 {
			t.Errorf("port %s at %d mod 64; want line-aligned", p.Name(), a)
		}
	}
	if a := uintptr(unsafe.Pointer(s)) % 64; a != 0 {
		t.Errorf("switch at %d mod 64; want line-aligned", a)
	}
	for _, nic := range n.NICs {
		q, err := nic.NewQP(QPConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if a := uintptr(unsafe.Pointer(nic)) % 64; a != 0 {
			t.Errorf("NIC %s at %d mod 64; want line-aligned", nic.Name(), a)
		}
		if a := uintptr(unsafe.Pointer(q)) % 64; a != 0 {
			t.Errorf("QP at %d mod 64; want line-aligned", a)
		}
	}
	if a := uintptr(unsafe.Pointer(&w.q.bkt[0])) % 64; a != 0 || unsafe.Sizeof(bucket{}) != 32 {
		t.Errorf("event wheel buckets at %d mod 64, %d bytes; want line-aligned, 32", a, unsafe.Sizeof(bucket{}))
	}
	for i := 0; i < 3; i++ {
		if a := uintptr(unsafe.Pointer(w.NewPacket())) % 64; a != 0 {
			t.Errorf("pool packet at %d mod 64; want line-aligned", a)
		}
	}
}
