package sim

import (
	"fmt"
	"testing"
)

// egressFull is Switch.egress read from the full route table, as it was
// before the tables were compressed by blocks of destinations.
func egressFull(s *Switch, p *Packet) int {
	if uint(p.Dst) >= uint(len(s.route)) {
		return -1
	}
	r := s.route[p.Dst]
	n := r >> 24
	if n == 1 {
		return int(r & 0xffffff)
	}
	if n == 0 {
		return -1
	}
	h := mix64(p.Flow ^ s.seed)
	i := uint32(((h >> 32) * uint64(n)) >> 32)
	return int(s.gports[r&0xffffff+i])
}

// checkEgress compares every switch's egress with egressFull for every
// destination (and a few beyond them) over many flows.
func checkEgress(t *testing.T, n *Network) {
	t.Helper()
	for _, s := range n.Switches {
		for d := -1; d < len(n.NICs)+70; d++ {
			for f := uint64(0); f < 16; f++ {
				p := &Packet{Kind: KindData, Dst: int32(d), Flow: mix64(f)}
				if got, want := s.egress(p), egressFull(s, p); got != want {
					t.Fatalf("switch %s, dst %d, flow %d: egress %d, full table %d (block shift %d)", s.name, d, f, got, want, s.bshift)
				}
			}
		}
	}
}

// TestCompressedRoutes: the block-compressed route tables the forwarding
// path reads give the egress of the full tables for every destination, on
// a leaf-spine whose leaves' host counts do not align with the blocks,
// with a cross link that makes some routes irregular, and after SetRoute
// changes single destinations.
func TestCompressedRoutes(t *testing.T) {
	for _, hostsPerLeaf := range []int{1, 3, 8, 16} {
		t.Run(fmt.Sprint(hostsPerLeaf), func(t *testing.T) {
			w := NewWorld(1)
			n := NewNetwork(w)
			cfg := LinkConfig{Rate: 100e9, Delay: Microsecond}
			var leaves, spines []*Switch
			for i := 0; i < 5; i++ {
				s, err := n.AddSwitch(fmt.Sprint("leaf", i), SwitchConfig{})
				if err != nil {
					t.Fatal(err)
				}
				leaves = append(leaves, s)
			}
			for i := 0; i < 3; i++ {
				s, err := n.AddSwitch(fmt.Sprint("spine", i), SwitchConfig{})
				if err != nil {
					t.Fatal(err)
				}
				spines = append(spines, s)
				for _, l := range leaves {
					if _, err := n.Link(l, s, cfg); err != nil {
						t.Fatal(err)
					}
				}
			}
			if _, err := n.Link(leaves[0], leaves[1], cfg); err != nil {
				t.Fatal(err)
			}
			for i, l := range leaves {
				for j := 0; j < hostsPerLeaf; j++ {
					h, err := n.AddHost(fmt.Sprint("h", i, ".", j), 1, NICConfig{})
					if err != nil {
						t.Fatal(err)
					}
					if _, err := n.Link(h.NIC(0), l, cfg); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := n.Build(); err != nil {
				t.Fatal(err)
			}
			if hostsPerLeaf == 8 && leaves[2].bshift != 3 {
				t.Errorf("block shift %d with 8 hosts per leaf; want 3", leaves[2].bshift)
			}
			checkEgress(t, n)
			// single destinations rerouted, then made unreachable
			last := len(n.NICs) - 1
			spines[1].SetRoute(n.NICs[0], spines[1].Ports()[3])
			leaves[4].SetRoute(n.NICs[last], leaves[4].Ports()[0], leaves[4].Ports()[2])
			checkEgress(t, n)
			spines[0].SetRoute(n.NICs[last])
			leaves[3].SetRoute(n.NICs[0])
			checkEgress(t, n)
			leaves[3].SetRoute(n.NICs[0], leaves[3].Ports()[1])
			checkEgress(t, n)
		})
	}
}
