package admit

import (
	"net/netip"
	"testing"
)

var (
	a1 = netip.MustParseAddr("10.0.0.1")
	a2 = netip.MustParseAddr("10.0.0.2")
	a3 = netip.MustParseAddr("10.0.0.3")
)

func TestPerSourceCap(t *testing.T) {
	tb := New[int](Config{Max: 100, PerSource: 3})
	for c := 1; c <= 3; c++ {
		if _, _, ok := tb.Admit(c, a1); !ok {
			t.Fatalf("Admit(%d, %v) refused below the per-source cap", c, a1)
		}
	}
	if _, _, ok := tb.Admit(4, a1); ok {
		t.Fatalf("Admit(4, %v) = ok; want refused: the source holds PerSource = 3 unauthenticated", a1)
	}
	if _, _, ok := tb.Admit(5, a2); !ok {
		t.Fatalf("Admit(5, %v) refused: another source has its own cap", a2)
	}
	// Authenticating frees the source's slot but not the table's.
	if !tb.Authenticated(1) {
		t.Fatal("Authenticated(1) = false for a held connection")
	}
	if _, _, ok := tb.Admit(6, a1); !ok {
		t.Fatal("Admit after one of the source's connections authenticated was refused")
	}
	if n := tb.Unauthenticated(a1); n != 3 {
		t.Fatalf("Unauthenticated(%v) = %d, want 3", a1, n)
	}
	if tb.Len() != 5 {
		t.Fatalf("Len() = %d, want 5", tb.Len())
	}
}

// TestEvictionWhenFull fills the table from one source; newcomers from
// lighter sources evict the oldest unauthenticated connection of the
// heaviest ones, a newcomer whose source is among the heaviest is refused,
// and authenticated connections are never evicted.
func TestEvictionWhenFull(t *testing.T) {
	a4 := netip.MustParseAddr("10.0.0.4")
	tb := New[int](Config{Max: 4, PerSource: 4})
	for c := 1; c <= 4; c++ {
		tb.Admit(c, a1)
	}
	tb.Authenticated(1)
	steps := []struct {
		c          int
		src        netip.Addr
		wantOK     bool
		wantVictim int // 0: none
	}{
		{10, a2, true, 2},  // a1 holds 3 unauthenticated, a2 none: a1's oldest (2; 1 is authenticated) goes
		{11, a3, true, 3},  // a1 holds 2 > 0
		{12, a2, false, 0}, // a1, a2, a3 hold 1 each: a2 is among the heaviest
		{13, a4, true, 4},  // a4 holds none: the oldest of the sources holding 1 goes (4, from a1)
		{14, a1, true, 10}, // a1 holds none now: a2's 10 is the oldest
	}
	for _, s := range steps {
		victim, evicted, ok := tb.Admit(s.c, s.src)
		if ok != s.wantOK || evicted != (s.wantVictim != 0) || evicted && victim != s.wantVictim {
			t.Fatalf("Admit(%d, %v) = victim %d (evicted %v), ok %v; want victim %d, ok %v", s.c, s.src, victim, evicted, ok, s.wantVictim, s.wantOK)
		}
	}
	if tb.Len() != 4 {
		t.Fatalf("Len() = %d, want 4 (Max)", tb.Len())
	}
	if tb.Authenticated(2) {
		t.Fatal("Authenticated(2) = true for an evicted connection")
	}
	if !tb.Remove(1) || tb.Remove(1) {
		t.Fatal("Remove(1) should report true once, then false")
	}
	if _, _, ok := tb.Admit(15, a2); !ok {
		t.Fatal("Admit after Remove freed a slot was refused")
	}
}

func TestSourceKey(t *testing.T) {
	cases := []struct{ in, want string }{
		{"192.0.2.7", "192.0.2.7"},
		{"::ffff:192.0.2.7", "192.0.2.7"},
		{"2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::"},
		{"fe80::1%eth0", "fe80::"},
	}
	for _, c := range cases {
		if got := SourceKey(netip.MustParseAddr(c.in)); got != netip.MustParseAddr(c.want) {
			t.Errorf("SourceKey(%s) = %v, want %s", c.in, got, c.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{Max: 0, PerSource: 1}).Validate(); err == nil {
		t.Error("Validate accepted Max 0")
	}
	if err := (Config{Max: 1, PerSource: 0}).Validate(); err == nil {
		t.Error("Validate accepted PerSource 0")
	}
}
