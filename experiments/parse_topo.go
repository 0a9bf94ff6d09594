package experiments

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strconv"

	"github.com/mptx-dev/mptx/experiments/interop"
)

// count is a whole-number topology field and its valid range.
type count struct {
	field  string
	get    func(*Topology) *int
	lo, hi int
	// hiOf, when set, gives hi from the topology (multi-rail's
	// hosts_per_leaf is at most hosts).
	hiOf func(*Topology) int
}

// topoKind is the table entry of one topology kind: the fields it takes
// besides kind, defaults for some of them, its counts and the checks that
// relate them.
type topoKind struct {
	fields   []string
	defaults func(v *validator)
	counts   []count
	checks   []func(t *Topology) (field, value, msg string)
}

var (
	cHosts        = func(t *Topology) *int { return &t.Hosts }
	cLeaves       = func(t *Topology) *int { return &t.Leaves }
	cSpines       = func(t *Topology) *int { return &t.Spines }
	cHostsPerLeaf = func(t *Topology) *int { return &t.HostsPerLeaf }
)

// rated are the fields every generated (not ns3) topology takes.
var rated = []string{"host_rate", "link_delay", "loss", "host_overrides"}

var topoTable = map[string]topoKind{
	TopoStar: {
		fields: append([]string{"hosts"}, rated...),
		counts: []count{{field: "hosts", get: cHosts, lo: 2, hi: 4096}},
	},
	TopoDumbbell: {
		fields: append([]string{"hosts", "fabric_rate"}, rated...),
		counts: []count{{field: "hosts", get: cHosts, lo: 1, hi: 4096}},
	},
	TopoLeafSpine: {
		fields: append([]string{"leaves", "spines", "hosts_per_leaf", "fabric_rate"}, rated...),
		counts: []count{
			{field: "leaves", get: cLeaves, lo: 1, hi: 1024},
			{field: "spines", get: cSpines, lo: 1, hi: 1024},
			{field: "hosts_per_leaf", get: cHostsPerLeaf, lo: 1, hi: 1024},
		},
		checks: []func(t *Topology) (string, string, string){
			func(t *Topology) (string, string, string) {
				if t.Leaves*t.HostsPerLeaf < 2 {
					return "hosts_per_leaf", strconv.Itoa(t.HostsPerLeaf), "leaves × hosts_per_leaf must be at least 2 hosts"
				}
				return "", "", ""
			},
			func(t *Topology) (string, string, string) {
				if t.Leaves*t.Spines > 65536 {
					return "spines", strconv.Itoa(t.Spines), "leaves × spines must be at most 65536 fabric links"
				}
				return "", "", ""
			},
			func(t *Topology) (string, string, string) {
				if t.Leaves*t.HostsPerLeaf > 65536 {
					return "hosts_per_leaf", strconv.Itoa(t.HostsPerLeaf), "leaves × hosts_per_leaf must be at most 65536 hosts"
				}
				return "", "", ""
			},
		},
	},
	TopoFatTree: {
		fields: append([]string{"k", "fabric_rate"}, rated...),
		counts: []count{{field: "k", get: func(t *Topology) *int { return &t.K }, lo: 2, hi: 64}},
		checks: []func(t *Topology) (string, string, string){
			func(t *Topology) (string, string, string) {
				if t.K%2 != 0 {
					return "k", strconv.Itoa(t.K), "k must be even (k pods of k/2 edge and k/2 aggregation switches)"
				}
				return "", "", ""
			},
		},
	},
	TopoMultiRail: {
		fields: append([]string{"hosts", "rails", "hosts_per_leaf", "spines", "fabric_rate"}, rated...),
		defaults: func(v *validator) {
			t := &v.s.Topology
			if !v.set("topology.hosts_per_leaf") {
				t.HostsPerLeaf = t.Hosts
			}
			if !v.set("topology.spines") {
				t.Spines = 1
			}
		},
		counts: []count{
			{field: "hosts", get: cHosts, lo: 2, hi: 4096},
			{field: "rails", get: func(t *Topology) *int { return &t.Rails }, lo: 1, hi: 16},
			{field: "hosts_per_leaf", get: cHostsPerLeaf, lo: 1, hiOf: func(t *Topology) int { return t.Hosts }},
			{field: "spines", get: cSpines, lo: 1, hi: 64},
		},
	},
	TopoNS3: {fields: []string{"file"}},
}

func (v *validator) topology() error {
	t := &v.s.Topology
	if t.Kind == "" {
		return v.fail("topology.kind", "", "required; "+oneOf(topoKinds))
	}
	k, ok := topoTable[t.Kind]
	if !ok {
		return v.fail("topology.kind", t.Kind, "unknown topology; "+oneOf(topoKinds))
	}
	if err := v.onlyFields("topology", "kind "+t.Kind, reflect.TypeFor[Topology](), k.fields); err != nil {
		return err
	}
	if k.defaults != nil {
		k.defaults(v)
	}
	for _, c := range k.counts {
		x, hi := *c.get(t), c.hi
		if c.hiOf != nil {
			hi = c.hiOf(t)
		}
		if x >= c.lo && x <= hi {
			continue
		}
		m := fmt.Sprintf("want a whole number in [%d, %d]", c.lo, hi)
		if !v.set("topology." + c.field) {
			return v.fail("topology."+c.field, "", "required for kind "+t.Kind+": "+m)
		}
		return v.fail("topology."+c.field, strconv.Itoa(x), m)
	}
	for _, check := range k.checks {
		if f, val, m := check(t); f != "" {
			return v.fail("topology."+f, val, m)
		}
	}
	if t.Kind == TopoNS3 {
		if err := v.ns3Topology(); err != nil {
			return err
		}
	} else if err := applyRules(topoRateRules)(v); err != nil {
		return err
	}
	for i := range t.HostOverrides {
		o := &t.HostOverrides[i]
		f := fmt.Sprintf("topology.host_overrides[%d]", i)
		if o.Hosts.IsZero() {
			return v.fail(f+".hosts", "", "required: the hosts whose links change")
		}
		if !rateRange(v.s, o.Rate) {
			return v.fail(f+".rate", o.Rate.String(), rateWant)
		}
	}
	v.g = t.Graph()
	for i := range t.HostOverrides {
		o := &t.HostOverrides[i]
		if o.Hosts.All {
			o.Hosts = HostSet{IDs: slices.Clone(v.g.Hosts)}
		}
		for _, id := range o.Hosts.IDs {
			if !v.g.IsHost(id) {
				return v.fail(fmt.Sprintf("topology.host_overrides[%d].hosts", i), strconv.Itoa(id), fmt.Sprintf("no such host (hosts are %s)", HostSet{IDs: v.g.Hosts}))
			}
		}
	}
	return v.connected()
}

// ns3Topology reads and checks topology.file.
func (v *validator) ns3Topology() error {
	t := &v.s.Topology
	if t.File == "" {
		return v.fail("topology.file", "", "required for kind ns3: the HPCC ns-3 topology.txt")
	}
	data, err := v.readRef("topology.file", t.File)
	if err != nil {
		return err
	}
	ns, perr := interop.ParseNS3Topology(bytes.NewReader(data), t.File)
	if perr != nil {
		return v.fail("topology.file", t.File, perr.Error())
	}
	if len(ns.Hosts()) < 2 {
		return v.fail("topology.file", t.File, "the topology has fewer than 2 hosts")
	}
	t.NS3 = ns
	return nil
}

// connected checks that the hosts can reach each other: every host from
// the first one (the graph is undirected, so that is all of them). The
// generated kinds are connected by construction; an ns3 file may not be.
func (v *validator) connected() error {
	if v.s.Topology.Kind != TopoNS3 {
		return nil
	}
	if h, ok := v.g.Unreachable(v.g.Hosts[0]); !ok {
		return v.fail("topology", v.s.Topology.Kind, fmt.Sprintf("hosts %d and %d are not connected", v.g.Hosts[0], h))
	}
	return nil
}
