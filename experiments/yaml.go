package experiments

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/mptx-dev/mptx/units"
)

// SpecError is a problem with an experiment spec. It names the file, the
// position (when known), the field as a dotted path (workloads[1].size),
// the offending value as written and what is allowed.
type SpecError struct {
	File  string
	Line  int // 1-based; 0 if unknown
	Col   int // 1-based; 0 if unknown
	Field string
	Value string
	Msg   string
}

// Error formats the problem as one line:
//
//	incast.yaml:12:9: matrix.cc[1] = "dcqnc": unknown congestion control; allowed: dcqcn, ...
func (e *SpecError) Error() string {
	var b strings.Builder
	b.WriteString(clip(e.File, 256))
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Col)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(clip(e.Field, 200))
		if e.Value != "" {
			b.WriteString(" = ")
			b.WriteString(strconv.Quote(clip(e.Value, 100)))
		}
		b.WriteString(": ")
	}
	b.WriteString(clip(e.Msg, 1000))
	// One line, whatever the file held (keys and messages may carry
	// newlines).
	return oneLine.Replace(b.String())
}

var oneLine = strings.NewReplacer("\n", `\n`, "\r", `\r`)

// clip shortens s to at most n bytes (on a rune boundary), saying how
// long it was, so that a huge value in a file never floods the terminal.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}

// pos is a 1-based line and column.
type pos struct{ line, col int }

type ykind uint8

const (
	yNull ykind = iota
	yScalar
	yMap
	yList
)

func (k ykind) String() string {
	switch k {
	case yScalar:
		return "a scalar"
	case yMap:
		return "a mapping"
	case yList:
		return "a list"
	}
	return "null"
}

// ynode is a YAML value with its position, anchors resolved. Mapping keys
// keep their order.
type ynode struct {
	kind   ykind
	pos    pos
	text   string // scalar text
	quoted bool   // scalar was quoted (always a string)
	keys   []string
	kpos   []pos
	vals   []*ynode
	items  []*ynode
}

// maxNodes bounds the nodes a spec may expand to (aliases included), so a
// hostile file cannot make the decoder work exponentially.
const maxNodes = 200000

// parseYAML parses one YAML document into a ynode tree. The document's
// nesting is bounded (MaxDepth) before the parser sees it: the parser
// recurses per level, and a file nested 100k deep made it use gigabytes.
func parseYAML(file string, data []byte) (*ynode, error) {
	toks := lexer.Tokenize(string(data))
	if p, why := tooDeep(toks); why != "" {
		return nil, &SpecError{File: file, Line: p.line, Col: p.col, Msg: why}
	}
	f, err := parser.Parse(toks, 0)
	if err != nil {
		return nil, yamlSyntaxError(file, err)
	}
	var docs []*ast.DocumentNode
	for _, d := range f.Docs {
		if d != nil && d.Body != nil {
			docs = append(docs, d)
		}
	}
	switch len(docs) {
	case 0:
		return nil, &SpecError{File: file, Msg: "empty spec: want a YAML mapping with at least name, topology, workloads"}
	case 1:
	default:
		p := tokPos(docs[1].Body.GetToken())
		if docs[1].Start != nil {
			p = tokPos(docs[1].Start)
		}
		return nil, &SpecError{File: file, Line: p.line, Col: p.col, Msg: "more than one YAML document: put one spec per file"}
	}
	c := &converter{file: file, anchors: map[string]*ynode{}}
	return c.convert(docs[0].Body)
}

// yamlSyntaxError turns a goccy error into a SpecError with a position.
func yamlSyntaxError(file string, err error) error {
	var ye interface {
		GetToken() *token.Token
		GetMessage() string
	}
	if errors.As(err, &ye) {
		p := tokPos(ye.GetToken())
		return &SpecError{File: file, Line: p.line, Col: p.col, Msg: "YAML syntax: " + ye.GetMessage()}
	}
	return &SpecError{File: file, Msg: "YAML syntax: " + err.Error()}
}

// tooDeep reports where the tokens nest past MaxDepth: flow collections
// ([ {) inside each other, block sequence entries (- - -) on one line, or
// indentation past MaxDepth × 8 columns.
func tooDeep(toks token.Tokens) (pos, string) {
	flow, line, entries, prev := 0, 0, 0, -1
	for _, t := range toks {
		p := tokPos(t)
		// The first token of a line sits at its indentation.
		first := p.line != prev
		prev = p.line
		switch t.Type {
		case token.SequenceStartType, token.MappingStartType:
			if flow++; flow > MaxDepth {
				return p, fmt.Sprintf("nested too deep: more than %d levels of [ and {", MaxDepth)
			}
		case token.SequenceEndType, token.MappingEndType:
			flow = max(flow-1, 0)
		case token.SequenceEntryType, token.MappingKeyType:
			if p.line != line {
				line, entries = p.line, 0
			}
			if entries++; entries > MaxDepth {
				return p, fmt.Sprintf("nested too deep: more than %d block entries (- or ?) on one line", MaxDepth)
			}
		}
		if first && p.col > 8*MaxDepth {
			return p, fmt.Sprintf("nested too deep: indented past column %d", 8*MaxDepth)
		}
	}
	return pos{}, ""
}

func tokPos(t *token.Token) pos {
	if t == nil || t.Position == nil {
		return pos{}
	}
	return pos{t.Position.Line, t.Position.Column}
}

type converter struct {
	file    string
	anchors map[string]*ynode
	n       int
}

func (c *converter) fail(p pos, msg string) error {
	return &SpecError{File: c.file, Line: p.line, Col: p.col, Msg: msg}
}

func (c *converter) convert(n ast.Node) (*ynode, error) {
	if c.n++; c.n > maxNodes {
		return nil, c.fail(pos{}, fmt.Sprintf("spec too large: more than %d YAML nodes", maxNodes))
	}
	if n == nil {
		return &ynode{kind: yNull}, nil
	}
	p := tokPos(n.GetToken())
	switch v := n.(type) {
	case *ast.DocumentNode:
		return c.convert(v.Body)
	case *ast.NullNode:
		return &ynode{kind: yNull, pos: p}, nil
	case *ast.StringNode:
		q := v.Token != nil && (v.Token.Type == token.SingleQuoteType || v.Token.Type == token.DoubleQuoteType)
		return &ynode{kind: yScalar, pos: p, text: v.Value, quoted: q}, nil
	case *ast.LiteralNode:
		s := ""
		if v.Value != nil {
			s = v.Value.Value
		}
		return &ynode{kind: yScalar, pos: p, text: s, quoted: true}, nil
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return &ynode{kind: yScalar, pos: p, text: n.GetToken().Value}, nil
	case *ast.TagNode:
		return c.convert(v.Value)
	case *ast.AnchorNode:
		val, err := c.convert(v.Value)
		if err != nil {
			return nil, err
		}
		if v.Name != nil {
			c.anchors[v.Name.GetToken().Value] = val
		}
		return val, nil
	case *ast.AliasNode:
		name := ""
		if v.Value != nil {
			name = v.Value.GetToken().Value
		}
		val, ok := c.anchors[name]
		if !ok {
			return nil, c.fail(p, fmt.Sprintf("alias %s refers to no anchor defined before it", strconv.Quote("*"+name)))
		}
		if c.n += countNodes(val, maxNodes-c.n+1); c.n > maxNodes {
			return nil, c.fail(p, fmt.Sprintf("spec too large: more than %d YAML nodes after expanding aliases", maxNodes))
		}
		return val, nil
	case *ast.MappingNode:
		return c.mapping(p, v.Values)
	case *ast.MappingValueNode:
		return c.mapping(p, []*ast.MappingValueNode{v})
	case *ast.SequenceNode:
		out := &ynode{kind: yList, pos: p}
		for _, it := range v.Values {
			y, err := c.convert(it)
			if err != nil {
				return nil, err
			}
			out.items = append(out.items, y)
		}
		return out, nil
	}
	return nil, c.fail(p, fmt.Sprintf("unsupported YAML construct %s", n.Type()))
}

// countNodes counts y's nodes, stopping once limit is passed.
func countNodes(y *ynode, limit int) int {
	n := 1
	for _, v := range y.vals {
		if n > limit {
			break
		}
		n += countNodes(v, limit-n)
	}
	for _, v := range y.items {
		if n > limit {
			break
		}
		n += countNodes(v, limit-n)
	}
	return n
}

// mapping converts key/value pairs, applying YAML merge keys (<<: *base):
// merged entries fill in keys the mapping does not set itself.
func (c *converter) mapping(p pos, mvs []*ast.MappingValueNode) (*ynode, error) {
	out := &ynode{kind: yMap, pos: p}
	var merged []*ynode
	for _, mv := range mvs {
		val, err := c.convert(mv.Value)
		if err != nil {
			return nil, err
		}
		kp := tokPos(mv.Key.GetToken())
		if _, ok := mv.Key.(*ast.MergeKeyNode); ok {
			switch val.kind {
			case yMap:
				merged = append(merged, val)
			case yList:
				for _, it := range val.items {
					if it.kind != yMap {
						return nil, c.fail(it.pos, "merge key <<: wants a mapping or a list of mappings")
					}
					merged = append(merged, it)
				}
			default:
				return nil, c.fail(kp, "merge key <<: wants a mapping or a list of mappings")
			}
			continue
		}
		key, err := c.convert(mv.Key)
		if err != nil {
			return nil, err
		}
		if key.kind != yScalar {
			return nil, c.fail(kp, "mapping keys must be plain names")
		}
		if i := slices.Index(out.keys, key.text); i >= 0 {
			return nil, c.fail(kp, fmt.Sprintf("duplicate key %q (first at line %d)", key.text, out.kpos[i].line))
		}
		out.keys = append(out.keys, key.text)
		out.kpos = append(out.kpos, kp)
		out.vals = append(out.vals, val)
	}
	for _, m := range merged {
		for i, k := range m.keys {
			if !slices.Contains(out.keys, k) {
				out.keys = append(out.keys, k)
				out.kpos = append(out.kpos, m.kpos[i])
				out.vals = append(out.vals, m.vals[i])
			}
		}
	}
	return out, nil
}

// decoder fills Go values from ynodes by reflection, following `yaml`
// struct tags. It records the position of every field it sets so that later
// validation can point at the line.
type decoder struct {
	file string
	seen map[string]pos
}

// scalarSetter is implemented by types written as one scalar.
type scalarSetter interface {
	setScalar(s string) error
}

// nodeDecoder is implemented by types with several written forms.
type nodeDecoder interface {
	decodeNode(d *decoder, n *ynode, path string) error
}

func (d *decoder) fail(n *ynode, path, value, msg string) error {
	e := &SpecError{File: d.file, Field: path, Value: value, Msg: msg}
	if n != nil {
		e.Line, e.Col = n.pos.line, n.pos.col
	}
	return e
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func (d *decoder) decode(n *ynode, v reflect.Value, path string) error {
	if n.kind == yNull {
		return nil // absent: keep the zero value, defaults apply later
	}
	if n.pos.line > 0 {
		d.seen[path] = n.pos
	}
	if v.CanAddr() {
		switch u := v.Addr().Interface().(type) {
		case nodeDecoder:
			return u.decodeNode(d, n, path)
		case scalarSetter:
			if n.kind != yScalar {
				return d.fail(n, path, "", "want a scalar, got "+n.kind.String())
			}
			if err := u.setScalar(n.text); err != nil {
				return d.fail(n, path, n.text, err.Error())
			}
			return nil
		}
	}
	switch v.Type() {
	case bytesType, rateType:
		if n.kind != yScalar {
			return d.fail(n, path, "", "want a scalar, got "+n.kind.String())
		}
		var x int64
		var err error
		if v.Type() == bytesType {
			var b Size
			b, err = parseSize(n.text)
			x = int64(b)
		} else {
			var r Rate
			r, err = parseRate(n.text)
			x = int64(r)
		}
		if err != nil {
			return d.fail(n, path, n.text, err.Error())
		}
		v.SetInt(x)
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		if err := d.decode(n, p.Elem(), path); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case reflect.Struct:
		return d.decodeStruct(n, v, path)
	case reflect.Slice:
		items := n.items
		if n.kind == yScalar {
			items = []*ynode{n} // x: v is shorthand for x: [v]
		} else if n.kind != yList {
			return d.fail(n, path, "", "want a list, got "+n.kind.String())
		}
		s := reflect.MakeSlice(v.Type(), len(items), len(items))
		for i, it := range items {
			if err := d.decode(it, s.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	case reflect.Map:
		if n.kind != yMap {
			return d.fail(n, path, "", "want a mapping, got "+n.kind.String())
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.keys))
		for i, k := range n.keys {
			e := reflect.New(v.Type().Elem()).Elem()
			if err := d.decode(n.vals[i], e, join(path, k)); err != nil {
				return err
			}
			m.SetMapIndex(reflect.ValueOf(k), e)
		}
		v.Set(m)
		return nil
	}
	if n.kind != yScalar {
		return d.fail(n, path, "", "want a scalar, got "+n.kind.String())
	}
	s := n.text
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		switch strings.ToLower(s) {
		case "true", "on", "yes":
			v.SetBool(true)
		case "false", "off", "no":
			v.SetBool(false)
		default:
			return d.fail(n, path, s, "want true or false (on/off)")
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		i, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil || n.quoted {
			return d.fail(n, path, s, "want a whole number")
		}
		v.SetInt(i)
	case reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || n.quoted || f != f || f > 1e300 || f < -1e300 {
			return d.fail(n, path, s, "want a finite number")
		}
		v.SetFloat(f)
	default:
		panic("experiments: BUG: no YAML decoding for " + v.Type().String())
	}
	return nil
}

func (d *decoder) decodeStruct(n *ynode, v reflect.Value, path string) error {
	if n.kind != yMap {
		return d.fail(n, path, "", "want a mapping, got "+n.kind.String())
	}
	t := v.Type()
	for i, k := range n.keys {
		f := fieldByTag(t, k)
		if f < 0 {
			kn := &ynode{pos: n.kpos[i]}
			return d.fail(kn, join(path, k), "", "unknown field; allowed: "+strings.Join(yamlFields(t), ", "))
		}
		if err := d.decode(n.vals[i], v.Field(f), join(path, k)); err != nil {
			return err
		}
	}
	return nil
}

func fieldByTag(t reflect.Type, name string) int {
	for i := 0; i < t.NumField(); i++ {
		if tag := t.Field(i).Tag.Get("yaml"); tag != "" && tag != "-" && tag == name {
			return i
		}
	}
	return -1
}

func yamlFields(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if tag := t.Field(i).Tag.Get("yaml"); tag != "" && tag != "-" {
			out = append(out, tag)
		}
	}
	return out
}

var (
	bytesType = reflect.TypeFor[units.Bytes]()
	rateType  = reflect.TypeFor[units.BitRate]()
)

// parseSize reads a size with an optional unit.
func parseSize(s string) (Size, error) {
	b, err := units.ParseBytes(s)
	if err != nil {
		return 0, errString("want a size with a unit (B, KiB, MiB, GiB, KB, MB, GB), e.g. 64KiB")
	}
	return b, nil
}

// parseRate reads a bit rate with an optional unit.
func parseRate(s string) (Rate, error) {
	r, err := units.ParseBitRate(s)
	if err != nil || r == units.Unlimited {
		return 0, errString("want a bit rate with a unit (Mbps, Gbps, Tbps), e.g. 100Gbps")
	}
	return r, nil
}

func (d *Duration) setScalar(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

func (h *HostSet) decodeNode(d *decoder, n *ynode, path string) error {
	*h = HostSet{}
	switch n.kind {
	case yList:
		for i, it := range n.items {
			p := fmt.Sprintf("%s[%d]", path, i)
			if it.kind != yScalar {
				return d.fail(it, p, "", "want a host id")
			}
			id, err := strconv.Atoi(it.text)
			if err != nil || id < 0 {
				return d.fail(it, p, it.text, "want a host id (a whole number >= 0)")
			}
			h.IDs = append(h.IDs, id)
		}
	case yScalar:
		hs, err := ParseHostSet(n.text)
		if err != nil {
			return d.fail(n, path, n.text, err.Error())
		}
		*h = hs
	default:
		return d.fail(n, path, "", "want host ids: a list, a range \"1-7\" or \"all\"")
	}
	slices.Sort(h.IDs)
	h.IDs = slices.Compact(h.IDs)
	return nil
}

// ParseHostSet parses "all", "3", "1-7" or "0,2,4-6".
func ParseHostSet(s string) (HostSet, error) {
	t := strings.TrimSpace(s)
	if t == "all" {
		return HostSet{All: true}, nil
	}
	const want = `want host ids: "all", an id, a range "1-7" or a comma list "0,2,4-6"`
	var h HostSet
	for _, part := range strings.Split(t, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil || a < 0 {
			return HostSet{}, errString(want)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < a {
				return HostSet{}, errString(want)
			}
		}
		if b-a > 1<<20 {
			return HostSet{}, errString("host range too large (more than 2^20 hosts)")
		}
		for i := a; i <= b; i++ {
			h.IDs = append(h.IDs, i)
		}
	}
	slices.Sort(h.IDs)
	h.IDs = slices.Compact(h.IDs)
	return h, nil
}

func (s *SizeDist) decodeNode(d *decoder, n *ynode, path string) error {
	*s = SizeDist{}
	switch n.kind {
	case yScalar:
		b, err := parseSize(n.text)
		if err != nil {
			return d.fail(n, path, n.text, err.Error())
		}
		s.Dist, s.Value = DistFixed, b
		return nil
	case yMap:
		type plain SizeDist // no decodeNode: decode field by field
		var p plain
		if err := d.decodeStruct(n, reflect.ValueOf(&p).Elem(), path); err != nil {
			return err
		}
		*s = SizeDist(p)
		return nil
	}
	return d.fail(n, path, "", "want a size (4MiB) or a distribution {dist: uniform|lognormal|cdf, ...}")
}
