package experiments

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mptx-dev/mptx/units"
)

// A spec's sweep section varies any scenario field, the way the matrix
// varies policies:
//
//	sweep:
//	  switch.buffer: [1MiB, 2MiB, 4MiB]                  # a list of values
//	  workloads[0].senders: {values: ["1-4", "1-8"], label: incast degree}
//	  topology.host_rate: {from: 25Gbps, to: 100Gbps, step: 25Gbps}
//	  workloads[0].size: {from: 1MiB, to: 64MiB, factor: 4}
//
// Keys are spec paths (dotted field names, [i] for a list element); each
// value replaces what the spec wrote there, and the spec is validated at
// every point of the cartesian product of the values (the first key
// varies slowest), so a bad value gets the usual error line, positioned at
// the value. Every point is crossed with the matrix and the seeds; its
// values enter its runs' hashes and the results' columns.

// Sweep limits.
const (
	// MaxSweepValues bounds one parameter's values.
	MaxSweepValues = 1000
	// MaxSweepPoints bounds the points of a sweep (the product of its
	// parameters' value counts).
	MaxSweepPoints = 1000
)

// unsweepable are the top-level fields a sweep may not vary.
var unsweepable = map[string]string{
	"name":        "a sweep's points share the scenario's name",
	"description": "the description is not part of a run",
	"matrix":      "the matrix already sweeps the policies",
	"seeds":       "list the seeds under seeds",
	"sweep":       "a sweep cannot sweep itself",
	"objective":   "the objective ranks results; it does not change a run",
}

// pathSeg is one step of a spec path: a mapping key, or a list index
// (key "" and index >= 0).
type pathSeg struct {
	key   string
	index int
}

// parsePath splits "workloads[0].size.max" into its steps.
func parsePath(p string) ([]pathSeg, bool) {
	var segs []pathSeg
	for part := range strings.SplitSeq(p, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if name == "" {
			return nil, false
		}
		for _, r := range name {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
				return nil, false
			}
		}
		segs = append(segs, pathSeg{key: name, index: -1})
		for rest != "" {
			num, after, ok := strings.Cut(rest, "]")
			i, err := strconv.Atoi(num)
			if !ok || err != nil || i < 0 || i > 1<<20 {
				return nil, false
			}
			segs = append(segs, pathSeg{index: i})
			if after == "" {
				break
			}
			if !strings.HasPrefix(after, "[") {
				return nil, false
			}
			rest = after[1:]
		}
	}
	return segs, len(segs) > 0
}

// fieldType returns the Go type a spec path names, walking Spec by its
// yaml tags.
func fieldType(segs []pathSeg) (reflect.Type, string) {
	t := reflect.TypeFor[Spec]()
	for i, s := range segs {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		where := pathString(segs[:i+1])
		if s.index >= 0 {
			if t.Kind() != reflect.Slice {
				return nil, where + " is not a list"
			}
			t = t.Elem()
			continue
		}
		switch {
		case t.Kind() == reflect.Map:
			t = t.Elem()
		case t.Kind() == reflect.Struct && t != reflect.TypeFor[HostSet]():
			f := fieldByTag(t, s.key)
			if f < 0 {
				return nil, where + ": no such field; allowed: " + strings.Join(yamlFields(t), ", ")
			}
			t = t.Field(f).Type
		default:
			return nil, pathString(segs[:i]) + " has no fields"
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t, ""
}

func pathString(segs []pathSeg) string {
	var b strings.Builder
	for _, s := range segs {
		if s.index >= 0 {
			fmt.Fprintf(&b, "[%d]", s.index)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.key)
	}
	return b.String()
}

// paramKind says how a field of type t reads as a number.
func paramKind(t reflect.Type, values []string) string {
	switch t {
	case reflect.TypeFor[units.Bytes](), reflect.TypeFor[SizeDist]():
		return ParamSize
	case reflect.TypeFor[units.BitRate]():
		return ParamRate
	case reflect.TypeFor[Duration]():
		return ParamDuration
	case reflect.TypeFor[HostSet]():
		return ParamHosts
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Float64:
		return ParamNumber
	case reflect.String:
		// A cc parameter ("ai: 40Mbps") is a string to the spec but a
		// number to a plot when every value reads as one.
		for _, k := range []string{ParamNumber, ParamRate, ParamDuration, ParamSize} {
			if !slices.ContainsFunc(values, func(v string) bool { _, ok := scalarX(k, v); return !ok }) {
				return k
			}
		}
	}
	return ParamText
}

// scalarX reads a value written for a field of kind k as that kind's
// number.
func scalarX(k, v string) (float64, bool) {
	switch k {
	case ParamSize:
		b, err := units.ParseBytes(v)
		return float64(b), err == nil
	case ParamRate:
		r, err := units.ParseBitRate(v)
		return float64(r) / 1e9, err == nil && r != units.Unlimited
	case ParamDuration:
		d, err := parseDuration(v)
		return float64(d) / 1e3, err == nil
	case ParamNumber:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return f, err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
	}
	return 0, false
}

// formatX writes a generated range value so that the field reads it back
// exactly.
func formatX(k string, x float64) string {
	switch k {
	case ParamSize:
		b := units.Bytes(math.Round(x))
		if back, err := units.ParseBytes(b.String()); err == nil && back == b {
			return b.String()
		}
		return strconv.FormatInt(int64(b), 10)
	case ParamRate:
		r := units.BitRate(math.Round(x * 1e9))
		if back, err := units.ParseBitRate(r.String()); err == nil && back == r {
			return r.String()
		}
		return strconv.FormatInt(int64(r), 10) + "bps"
	case ParamDuration:
		return time.Duration(math.Round(x * 1e3)).String()
	}
	return fmtFloat(x)
}

// sweepEntry is a parsed sweep key.
type sweepEntry struct {
	param SweepParam
	segs  []pathSeg
	nodes []*ynode
}

// takeSweep removes the sweep section from root and parses it.
func takeSweep(file string, root *ynode) ([]sweepEntry, *ynode, error) {
	i := slices.Index(root.keys, "sweep")
	if i < 0 {
		return nil, root, nil
	}
	node := root.vals[i]
	rest := &ynode{kind: yMap, pos: root.pos,
		keys: slices.Delete(slices.Clone(root.keys), i, i+1),
		kpos: slices.Delete(slices.Clone(root.kpos), i, i+1),
		vals: slices.Delete(slices.Clone(root.vals), i, i+1)}
	fail := func(p pos, field, value, m string) error {
		return &SpecError{File: file, Line: p.line, Col: p.col, Field: field, Value: value, Msg: m}
	}
	switch node.kind {
	case yNull:
		return nil, rest, nil
	case yMap:
	default:
		return nil, nil, fail(node.pos, "sweep", "", "want a mapping of spec paths to values, e.g. sweep: {switch.buffer: [1MiB, 4MiB]}")
	}
	var out []sweepEntry
	points := 1
	for k, key := range node.keys {
		field := "sweep." + key
		kp := node.kpos[k]
		segs, ok := parsePath(key)
		if !ok {
			return nil, nil, fail(kp, field, "", "want a spec path such as switch.buffer or workloads[0].load")
		}
		if why, bad := unsweepable[segs[0].key]; bad {
			return nil, nil, fail(kp, field, "", "cannot sweep "+segs[0].key+": "+why)
		}
		if slices.ContainsFunc(out, func(e sweepEntry) bool { return e.param.Path == pathString(segs) }) {
			return nil, nil, fail(kp, field, "", "swept twice")
		}
		t, why := fieldType(segs)
		if t == nil {
			return nil, nil, fail(kp, field, "", why)
		}
		e := sweepEntry{param: SweepParam{Path: pathString(segs)}, segs: segs}
		val := node.vals[k]
		if err := e.values(file, field, val, t); err != nil {
			return nil, nil, err
		}
		if e.param.Label == "" {
			e.param.Label = e.param.Path
		}
		if points *= len(e.nodes); points > MaxSweepPoints {
			return nil, nil, fail(kp, field, "", fmt.Sprintf("the sweep has more than %d points", MaxSweepPoints))
		}
		out = append(out, e)
	}
	return out, rest, nil
}

// values reads a sweep key's values: a list, a single scalar, or a
// mapping with values or a range (from, to and step or factor) and an
// optional label.
func (e *sweepEntry) values(file, field string, n *ynode, t reflect.Type) error {
	fail := func(n *ynode, f, value, m string) error {
		return &SpecError{File: file, Line: n.pos.line, Col: n.pos.col, Field: f, Value: value, Msg: m}
	}
	var items []*ynode
	switch n.kind {
	case yScalar:
		items = []*ynode{n}
	case yList:
		items = n.items
	case yMap:
		var from, to, step, factor, values *ynode
		for i, k := range n.keys {
			v := n.vals[i]
			switch k {
			case "values":
				values = v
			case "from":
				from = v
			case "to":
				to = v
			case "step":
				step = v
			case "factor":
				factor = v
			case "label":
				if v.kind != yScalar {
					return fail(v, field+".label", "", "want text")
				}
				e.param.Label = v.text
			default:
				return fail(&ynode{pos: n.kpos[i]}, field+"."+k, "", "unknown field; allowed: values, from, to, step, factor, label")
			}
		}
		switch {
		case values != nil && from == nil && to == nil && step == nil && factor == nil:
			if values.kind == yScalar {
				items = []*ynode{values}
			} else if values.kind == yList {
				items = values.items
			} else {
				return fail(values, field+".values", "", "want a list of values")
			}
		case values == nil && from != nil && to != nil && (step == nil) != (factor == nil):
			var err error
			if items, err = e.rangeValues(file, field, t, from, to, step, factor); err != nil {
				return err
			}
		default:
			return fail(n, field, "", "want values: [...], or from and to with step or factor")
		}
	default:
		return fail(n, field, "", "want a list of values")
	}
	if len(items) == 0 {
		return fail(n, field, "", "no values")
	}
	if len(items) > MaxSweepValues {
		return fail(n, field, strconv.Itoa(len(items)), fmt.Sprintf("at most %d values", MaxSweepValues))
	}
	for i, it := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		if it.kind != yScalar {
			return fail(it, f, "", "want a scalar value (write a host set as a range such as \"1-8\")")
		}
		if slices.Contains(e.param.Values, it.text) {
			return fail(it, f, it.text, "listed twice")
		}
		e.param.Values = append(e.param.Values, it.text)
	}
	e.nodes = items
	e.param.Kind = paramKind(t, e.param.Values)
	return nil
}

// rangeValues generates a numeric range's values as scalar nodes placed
// at the range's from.
func (e *sweepEntry) rangeValues(file, field string, t reflect.Type, from, to, step, factor *ynode) ([]*ynode, error) {
	k := paramKind(t, nil)
	if k == ParamHosts || k == ParamText {
		return nil, &SpecError{File: file, Line: from.pos.line, Col: from.pos.col, Field: field, Msg: "a range needs a numeric field (a size, rate, duration or number); list the values instead"}
	}
	read := func(n *ynode, name string) (float64, error) {
		if n.kind == yScalar {
			if x, ok := scalarX(k, n.text); ok {
				return x, nil
			}
		}
		return 0, &SpecError{File: file, Line: n.pos.line, Col: n.pos.col, Field: field + "." + name, Value: n.text, Msg: "want a " + k + " like the field's values"}
	}
	lo, err := read(from, "from")
	if err != nil {
		return nil, err
	}
	hi, err := read(to, "to")
	if err != nil {
		return nil, err
	}
	var xs []float64
	if step != nil {
		d, err := read(step, "step")
		if err != nil {
			return nil, err
		}
		if !(d > 0) || hi < lo {
			return nil, &SpecError{File: file, Line: step.pos.line, Col: step.pos.col, Field: field + ".step", Value: step.text, Msg: "want a positive step and to >= from"}
		}
		for i := 0; ; i++ {
			x := lo + float64(i)*d
			if x > hi*(1+1e-9)+1e-12 || len(xs) > MaxSweepValues {
				break
			}
			xs = append(xs, x)
		}
	} else {
		f, err := strconv.ParseFloat(strings.TrimSpace(factor.text), 64)
		if err != nil || !(f > 1) || factor.kind != yScalar || !(lo > 0) || hi < lo {
			return nil, &SpecError{File: file, Line: factor.pos.line, Col: factor.pos.col, Field: field + ".factor", Value: factor.text, Msg: "want a factor > 1, from > 0 and to >= from"}
		}
		for x := lo; x <= hi*(1+1e-9) && len(xs) <= MaxSweepValues; x *= f {
			xs = append(xs, x)
		}
	}
	out := make([]*ynode, len(xs))
	for i, x := range xs {
		out[i] = &ynode{kind: yScalar, pos: from.pos, text: formatX(k, x)}
	}
	return out, nil
}

// setPath returns a copy of n with the node at segs[i:] replaced by val;
// mappings along the path are created when absent. Nothing n shares is
// modified. On failure it returns nil and what is wrong.
func setPath(n *ynode, segs []pathSeg, i int, val *ynode) (*ynode, string) {
	if i == len(segs) {
		return val, ""
	}
	s := segs[i]
	if s.index >= 0 {
		if n.kind != yList {
			return nil, fmt.Sprintf("the spec's %s is %s, not a list", pathString(segs[:i]), n.kind)
		}
		if s.index >= len(n.items) {
			return nil, fmt.Sprintf("the spec's %s has %d item(s), so there is no [%d]", pathString(segs[:i]), len(n.items), s.index)
		}
		c := *n
		c.items = slices.Clone(n.items)
		child, why := setPath(n.items[s.index], segs, i+1, val)
		if child == nil {
			return nil, why
		}
		c.items[s.index] = child
		return &c, ""
	}
	var c ynode
	switch n.kind {
	case yNull:
		c = ynode{kind: yMap, pos: n.pos}
	case yMap:
		c = *n
		c.keys, c.kpos, c.vals = slices.Clone(n.keys), slices.Clone(n.kpos), slices.Clone(n.vals)
	default:
		return nil, fmt.Sprintf("the spec's %s is %s, not a mapping", pathString(segs[:i]), n.kind)
	}
	k := slices.Index(c.keys, s.key)
	if k < 0 {
		c.keys, c.kpos, c.vals = append(c.keys, s.key), append(c.kpos, val.pos), append(c.vals, &ynode{kind: yNull})
		k = len(c.keys) - 1
	}
	child, why := setPath(c.vals[k], segs, i+1, val)
	if child == nil {
		return nil, why
	}
	c.vals[k] = child
	return &c, ""
}

// parseSweep parses every point of a sweep; the first point is returned
// and holds them all.
func parseSweep(file string, data []byte, root *ynode, read func(string) ([]byte, error), sweep []sweepEntry) (*Spec, error) {
	params := make([]SweepParam, len(sweep))
	for i, e := range sweep {
		params[i] = e.param
	}
	idx := make([]int, len(sweep)) // the current point, as value indices
	var points []*Spec
	for {
		node := root
		ps := make([]Param, len(sweep))
		var where []string
		for i, e := range sweep {
			val := e.nodes[idx[i]]
			var why string
			if node, why = setPath(node, e.segs, 0, val); node == nil {
				return nil, &SpecError{File: file, Line: val.pos.line, Col: val.pos.col, Field: "sweep." + e.param.Path, Msg: why}
			}
			ps[i] = Param{Name: e.param.Path, Label: e.param.Label, Value: val.text, Kind: e.param.Kind}
			where = append(where, e.param.Path+" = "+val.text)
		}
		s, err := parseOne(file, data, node, read, ps)
		if err != nil {
			se := asSpecError(file, err)
			c := *se
			c.Msg += " (at sweep point " + strings.Join(where, ", ") + ")"
			return nil, &c
		}
		for i, e := range sweep {
			x, ok := paramValue(s, e.segs, e.param.Kind, idx[i], ps[i].Value)
			if !ok {
				x = float64(idx[i])
				s.Params[i].Kind = ParamText
			}
			s.Params[i].X = x
		}
		s.Sweep = params
		points = append(points, s)
		if len(points) == 1 {
			if n := len(Expand(s)) * pointCount(sweep); n > MaxRuns {
				return nil, &SpecError{File: file, Field: "sweep", Value: strconv.Itoa(n), Msg: fmt.Sprintf("sweep points × matrix × seeds makes %d runs; at most %d", n, MaxRuns)}
			}
		}
		// Next point: the last parameter varies fastest.
		k := len(idx) - 1
		for k >= 0 {
			if idx[k]++; idx[k] < len(sweep[k].nodes) {
				break
			}
			idx[k] = 0
			k--
		}
		if k < 0 {
			break
		}
	}
	// A parameter whose values did not all read as numbers is text.
	for i := range sweep {
		if slices.ContainsFunc(points, func(p *Spec) bool { return p.Params[i].Kind == ParamText }) {
			for _, p := range points {
				p.Params[i].Kind = ParamText
				p.Params[i].X = float64(slices.Index(sweep[i].param.Values, p.Params[i].Value))
			}
			params[i].Kind = ParamText
		}
	}
	points[0].points = points
	return points[0], nil
}

func pointCount(sweep []sweepEntry) int {
	n := 1
	for _, e := range sweep {
		n *= len(e.nodes)
	}
	return n
}

// paramValue reads the swept field of a validated spec as its kind's
// number (a host set's size after "all" is resolved, a size's bytes).
func paramValue(s *Spec, segs []pathSeg, kind string, idx int, written string) (float64, bool) {
	v := reflect.ValueOf(s).Elem()
	for _, sg := range segs {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return 0, false
			}
			v = v.Elem()
		}
		switch {
		case sg.index >= 0:
			if v.Kind() != reflect.Slice || sg.index >= v.Len() {
				return 0, false
			}
			v = v.Index(sg.index)
		case v.Kind() == reflect.Map:
			v = v.MapIndex(reflect.ValueOf(sg.key))
			if !v.IsValid() {
				return 0, false
			}
		case v.Kind() == reflect.Struct:
			f := fieldByTag(v.Type(), sg.key)
			if f < 0 {
				return 0, false
			}
			v = v.Field(f)
		default:
			return 0, false
		}
	}
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return 0, false
		}
		v = v.Elem()
	}
	switch x := v.Interface().(type) {
	case units.Bytes:
		return float64(x), true
	case units.BitRate:
		return float64(x) / 1e9, true
	case Duration:
		return float64(x) / 1e3, true
	case HostSet:
		return float64(len(x.IDs)), true
	case SizeDist:
		if x.Dist == DistFixed {
			return float64(x.Value), true
		}
		return 0, false
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	case string:
		return scalarX(kind, x)
	case bool:
		return float64(idx), true
	}
	return 0, false
}
