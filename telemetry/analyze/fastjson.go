package analyze

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/mptx-dev/mptx/telemetry/schema"
)

// fastDecoder reads the span records of one OTLP JSON traces document
// (an ExportTraceServiceRequest or TracesData, or Jaeger's {"result": …}
// around one) without building pdata: a single pass over the bytes that
// decodes the few fields the analysis uses and validates and skips the
// rest. It exists for speed: pdata's unmarshaler builds every span, every
// attribute and every string (≈ 85 allocations and 5 µs per chunk span),
// which made reading a million spans take most of a minute; this pass
// allocates only for the strings it keeps (interned) and the records.
//
// It is strict where pdata is lenient and never the other way round: on
// anything it does not recognise exactly (a malformed document, an
// unexpected type, a duplicate key, an id of the wrong length) it returns
// an error, and decodeLine then decodes the line with pdata, which either
// accepts it (and its records are used) or reports the error. So its
// output is pdata's whenever it succeeds: FuzzFastDecoder checks exactly
// that against the pdata path on arbitrary input.
//
// A fastDecoder is owned by one goroutine; it keeps its interned strings
// across documents.
type fastDecoder struct {
	d      []byte
	i      int
	intern map[string]string
	out    []spanRec
	spans  int
	last   int    // records of the previous document: the next one's capacity
	buf    []byte // unescaped string scratch
}

var errFast = errors.New("not handled by the fast decoder")

// recPool recycles record slices: the stream copies what it keeps of a
// batch's records (the builders' own structures), so a batch's slice is
// free once added. A record is ~450 bytes; without it a million spans
// allocate half a gigabyte, which the collector then chases.
var recPool sync.Pool

func getRecs(n int) []spanRec {
	if p, ok := recPool.Get().(*[]spanRec); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]spanRec, 0, max(n, 16))
}

func putRecs(r []spanRec) {
	if cap(r) > 0 && cap(r) <= 1<<16 {
		clear(r[:cap(r)]) // drop the strings and slices they point to
		r = r[:0]
		recPool.Put(&r)
	}
}

func newFastDecoder() *fastDecoder { return &fastDecoder{intern: map[string]string{}} }

// decode returns the mptx spans of doc and the number of spans of any
// name, or an error when the fast path does not handle doc.
func (f *fastDecoder) decode(doc []byte) ([]spanRec, int, error) {
	f.d, f.i, f.spans = doc, 0, 0
	f.out = getRecs(f.last)
	err := f.document()
	f.d = nil
	if err != nil {
		putRecs(f.out)
		return nil, 0, err
	}
	f.last = len(f.out)
	return f.out, f.spans, nil
}

func (f *fastDecoder) fail() error { return errFast }

func (f *fastDecoder) ws() {
	for f.i < len(f.d) {
		switch f.d[f.i] {
		case ' ', '\t', '\n', '\r':
			f.i++
		default:
			return
		}
	}
}

func (f *fastDecoder) peek() byte {
	if f.i < len(f.d) && f.d[f.i] > ' ' {
		return f.d[f.i]
	}
	f.ws()
	if f.i >= len(f.d) {
		return 0
	}
	return f.d[f.i]
}

func (f *fastDecoder) expect(c byte) error {
	if f.peek() != c {
		return f.fail()
	}
	f.i++
	return nil
}

// object calls field for each key of an object; field must consume the
// value. Duplicate keys are refused (pdata's handling of them is its own).
func (f *fastDecoder) object(field func(key []byte) error) error {
	if err := f.expect('{'); err != nil {
		return err
	}
	if f.peek() == '}' {
		f.i++
		return nil
	}
	var seen [16][]byte
	n := 0
	for {
		key, err := f.rawString()
		if err != nil {
			return err
		}
		for _, k := range seen[:min(n, len(seen))] {
			if bytes.Equal(k, key) {
				return f.fail()
			}
		}
		if n < len(seen) {
			seen[n] = key
		} else {
			return f.fail() // more keys than any OTLP message has
		}
		n++
		if err := f.expect(':'); err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
		switch f.peek() {
		case ',':
			f.i++
		case '}':
			f.i++
			return nil
		default:
			return f.fail()
		}
	}
}

// array calls elem for each element; null is an empty array.
func (f *fastDecoder) array(elem func() error) error {
	if f.peek() == 'n' {
		return f.literal("null")
	}
	if err := f.expect('['); err != nil {
		return err
	}
	if f.peek() == ']' {
		f.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch f.peek() {
		case ',':
			f.i++
		case ']':
			f.i++
			return nil
		default:
			return f.fail()
		}
	}
}

func (f *fastDecoder) literal(lit string) error {
	if !bytes.HasPrefix(f.d[f.i:], []byte(lit)) {
		return f.fail()
	}
	f.i += len(lit)
	return nil
}

// strClass classifies bytes inside a JSON string: 0 plain, 1 the closing
// quote, 2 a backslash, 3 a control character (refused), 4 non-ASCII.
var strClass = func() (t [256]byte) {
	for c := range 0x20 {
		t[c] = 3
	}
	t['"'], t['\\'] = 1, 2
	for c := 0x80; c < 0x100; c++ {
		t[c] = 4
	}
	return t
}()

// rawString returns a string's bytes (unescaped into scratch space when it
// holds escapes: valid until the next string).
func (f *fastDecoder) rawString() ([]byte, error) {
	if err := f.expect('"'); err != nil {
		return nil, err
	}
	start := f.i
	d := f.d
	ascii := true
	for i := start; i < len(d); i++ {
		switch strClass[d[i]] {
		case 0:
			continue
		case 1:
			seg := d[start:i]
			if !ascii && !utf8.Valid(seg) { // invalid UTF-8: pdata's business
				return nil, f.fail()
			}
			f.i = i + 1
			return seg, nil
		case 2:
			f.i = i
			return f.escaped(start)
		case 3:
			return nil, f.fail()
		case 4:
			ascii = false
		}
	}
	return nil, f.fail()
}

// escaped finishes a string holding escapes into f.buf.
func (f *fastDecoder) escaped(start int) ([]byte, error) {
	f.buf = append(f.buf[:0], f.d[start:f.i]...)
	for f.i < len(f.d) {
		c := f.d[f.i]
		switch {
		case c == '"':
			f.i++
			return f.buf, nil
		case c < 0x20:
			return nil, f.fail()
		case c != '\\':
			if c >= 0x80 {
				r, size := utf8.DecodeRune(f.d[f.i:])
				if r == utf8.RuneError && size == 1 {
					return nil, f.fail()
				}
				f.buf = append(f.buf, f.d[f.i:f.i+size]...)
				f.i += size
				continue
			}
			f.buf = append(f.buf, c)
			f.i++
			continue
		}
		if f.i+1 >= len(f.d) {
			return nil, f.fail()
		}
		e := f.d[f.i+1]
		f.i += 2
		switch e {
		case '"', '\\', '/':
			f.buf = append(f.buf, e)
		case 'b':
			f.buf = append(f.buf, '\b')
		case 'f':
			f.buf = append(f.buf, '\f')
		case 'n':
			f.buf = append(f.buf, '\n')
		case 'r':
			f.buf = append(f.buf, '\r')
		case 't':
			f.buf = append(f.buf, '\t')
		case 'u':
			r, ok := f.hex4()
			if !ok {
				return nil, f.fail()
			}
			if utf16.IsSurrogate(r) {
				if f.i+1 < len(f.d) && f.d[f.i] == '\\' && f.d[f.i+1] == 'u' {
					f.i += 2
					r2, ok := f.hex4()
					if !ok {
						return nil, f.fail()
					}
					r = utf16.DecodeRune(r, r2)
				} else {
					r = utf8.RuneError
				}
			}
			f.buf = utf8.AppendRune(f.buf, r)
		default:
			return nil, f.fail()
		}
	}
	return nil, f.fail()
}

func (f *fastDecoder) hex4() (rune, bool) {
	if f.i+4 > len(f.d) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(f.d[f.i:f.i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	f.i += 4
	return rune(v), true
}

// skip validates and skips one value.
func (f *fastDecoder) skip() error {
	switch f.peek() {
	case '{':
		return f.object(func([]byte) error { return f.skip() })
	case '[':
		return f.array(f.skip)
	case '"':
		_, err := f.rawString()
		return err
	case 't':
		return f.literal("true")
	case 'f':
		return f.literal("false")
	case 'n':
		return f.literal("null")
	default:
		_, _, err := f.number()
		return err
	}
}

// number scans a JSON number and returns its text and whether it is an
// integer (no fraction or exponent).
func (f *fastDecoder) number() ([]byte, bool, error) {
	start := f.i
	d := f.d
	if f.i < len(d) && d[f.i] == '-' {
		f.i++
	}
	digits := func() int {
		n := 0
		for f.i < len(d) && d[f.i] >= '0' && d[f.i] <= '9' {
			f.i++
			n++
		}
		return n
	}
	if f.i < len(d) && d[f.i] == '0' {
		f.i++
	} else if digits() == 0 {
		return nil, false, f.fail()
	}
	integer := true
	if f.i < len(d) && d[f.i] == '.' {
		f.i++
		integer = false
		if digits() == 0 {
			return nil, false, f.fail()
		}
	}
	if f.i < len(d) && (d[f.i] == 'e' || d[f.i] == 'E') {
		f.i++
		integer = false
		if f.i < len(d) && (d[f.i] == '+' || d[f.i] == '-') {
			f.i++
		}
		if digits() == 0 {
			return nil, false, f.fail()
		}
	}
	return d[start:f.i], integer, nil
}

// uint64Field reads a uint64 given as a decimal string or an integer (the
// protobuf JSON mapping of fixed64/uint64), at most max.
func (f *fastDecoder) uintField(max uint64) (uint64, error) {
	txt, err := f.intText()
	if err != nil {
		return 0, err
	}
	if len(txt) == 0 || txt[0] == '-' {
		return 0, f.fail()
	}
	v, ok := parseDecimal(txt)
	if !ok || v > max {
		return 0, f.fail()
	}
	return v, nil
}

func (f *fastDecoder) uint64Field() (uint64, error) { return f.uintField(math.MaxUint64) }

// int64Field reads an int64 given as a decimal string or an integer.
func (f *fastDecoder) int64Field() (int64, error) {
	txt, err := f.intText()
	if err != nil {
		return 0, err
	}
	neg := len(txt) > 0 && txt[0] == '-'
	if neg {
		txt = txt[1:]
	}
	v, ok := parseDecimal(txt)
	if !ok || (!neg && v > math.MaxInt64) || (neg && v > 1<<63) {
		return 0, f.fail()
	}
	if neg {
		return -int64(v), nil
	}
	return int64(v), nil
}

// intText returns an integer's text: the contents of a string, or a JSON
// integer.
func (f *fastDecoder) intText() ([]byte, error) {
	if f.peek() == '"' {
		return f.rawString()
	}
	b, integer, err := f.number()
	if err != nil || !integer {
		return nil, f.fail()
	}
	return b, nil
}

// parseDecimal parses 1 to 20 decimal digits, as strconv.ParseUint does
// (no sign, no leading '+', leading zeros allowed), without allocating.
func parseDecimal(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

func (f *fastDecoder) document() error {
	if f.peek() != '{' {
		return f.fail()
	}
	err := f.object(func(key []byte) error {
		switch string(key) {
		case "resourceSpans", "resource_spans":
			return f.array(f.resourceSpans)
		case "result": // Jaeger API v3
			return f.object(func(k []byte) error {
				switch string(k) {
				case "resourceSpans", "resource_spans":
					return f.array(f.resourceSpans)
				}
				return f.fail()
			})
		}
		return f.fail()
	})
	if err != nil {
		return err
	}
	if f.peek() != 0 {
		return f.fail() // trailing bytes
	}
	return nil
}

func (f *fastDecoder) resourceSpans() error {
	service, hasService := "", false
	first := len(f.out)
	err := f.object(func(key []byte) error {
		switch string(key) {
		case "resource":
			return f.object(func(k []byte) error {
				switch string(k) {
				case "attributes":
					return f.array(func() error {
						idx, v, err := f.kvPair(resourceAttrIndex, func(int) bool { return true })
						if err != nil {
							return err
						}
						if idx == 1 && !hasService { // pcommon.Map.Get: the first
							s, ok := v.asString()
							if !ok {
								return f.fail()
							}
							service, hasService = s, true
						}
						return nil
					})
				case "droppedAttributesCount", "dropped_attributes_count":
					_, err := f.uintField(math.MaxUint32)
					return err
				}
				return f.fail()
			})
		case "scopeSpans", "scope_spans":
			return f.array(func() error {
				return f.object(func(k []byte) error {
					switch string(k) {
					case "spans":
						return f.array(f.span)
					case "scope":
						return f.scope()
					case "schemaUrl", "schema_url":
						_, err := f.rawString()
						return err
					}
					return f.fail()
				})
			})
		case "schemaUrl", "schema_url":
			_, err := f.rawString()
			return err
		}
		return f.fail()
	})
	// The resource may follow its spans in the document.
	for i := first; i < len(f.out); i++ {
		f.out[i].service = service
	}
	return err
}

func (f *fastDecoder) scope() error {
	return f.object(func(k []byte) error {
		switch string(k) {
		case "name", "version":
			_, err := f.rawString()
			return err
		case "attributes":
			return f.array(func() error {
				_, _, err := f.kvPair(func([]byte) int { return 0 }, nil)
				return err
			})
		case "droppedAttributesCount", "dropped_attributes_count":
			_, err := f.uintField(math.MaxUint32)
			return err
		}
		return f.fail()
	})
}

// resourceAttrIndex: 1 for service.name.
func resourceAttrIndex(k []byte) int {
	if string(k) == schema.AttrServiceName {
		return 1
	}
	return 0
}

// value is a decoded attribute value: the types the analysis reads.
// Both decoders produce it: pdata's (valueOf) and the fast one.
type value struct {
	kind   byte // 's' string, 'i' int, 'd' double, 'b' bool, 'x' array, map or bytes, 0 empty
	str    string
	hasStr bool // str is pcommon.Value.AsString()'s text
	i      int64
	d      float64
}

// asString is pcommon.Value.AsString; ok is false when the fast decoder
// cannot produce it (doubles, arrays, maps: the line then goes to pdata).
func (v value) asString() (string, bool) {
	if v.kind == 'i' && v.str == "" {
		return strconv.FormatInt(v.i, 10), true
	}
	return v.str, v.hasStr
}

// asInt is intValue's rule on a decoded value.
func (v value) asInt() (int64, bool) {
	switch v.kind {
	case 'i':
		return v.i, true
	case 'd':
		return int64(v.d), true
	case 's':
		if n, err := strconv.ParseInt(v.str, 10, 64); err == nil {
			return n, true
		}
	}
	return 0, false
}

// kvPair reads one {"key": …, "value": {…}} whose key comes first (the
// order OTLP exporters write; anything else goes to pdata). index maps the
// key to the caller's attribute index, 0 for one it does not read: that
// value is validated and skipped. String values of indices str reports
// are interned.
func (f *fastDecoder) kvPair(index func([]byte) int, str func(int) bool) (int, value, error) {
	if idx, v, ok := f.kvCompact(index, str); ok {
		return idx, v, nil
	}
	if err := f.expect('{'); err != nil {
		return 0, value{}, err
	}
	k, err := f.rawString()
	if err != nil || string(k) != "key" || f.expect(':') != nil {
		return 0, value{}, f.fail()
	}
	kb, err := f.rawString()
	if err != nil {
		return 0, value{}, err
	}
	idx := index(kb)
	v := value{hasStr: true} // no value: AsString is ""
	switch f.peek() {
	case '}':
		f.i++
		return idx, v, nil
	case ',':
		f.i++
	default:
		return 0, value{}, f.fail()
	}
	k, err = f.rawString()
	if err != nil || string(k) != "value" || f.expect(':') != nil {
		return 0, value{}, f.fail()
	}
	if idx == 0 {
		err = f.skipAnyValue()
	} else {
		v, err = f.anyValue(str(idx))
	}
	if err != nil {
		return 0, value{}, err
	}
	if f.expect('}') != nil {
		return 0, value{}, f.fail()
	}
	return idx, v, nil
}

// kvCompact reads the compact form every OTLP JSON exporter writes,
// {"key":"k","value":{"stringValue":"s"}} (or intValue "n" or n), without
// the general machinery: a handful of comparisons per attribute, most of a
// span's bytes. Anything else (whitespace, escapes, other value types)
// rewinds and reports false, and kvPair reads it the general way.
func (f *fastDecoder) kvCompact(index func([]byte) int, str func(int) bool) (int, value, bool) {
	const head, mid = `{"key":"`, `","value":{"`
	d, start := f.d, f.i
	if !bytes.HasPrefix(d[start:], []byte(head)) {
		return 0, value{}, false
	}
	i := start + len(head)
	j := plainEnd(d, i)
	if j < 0 || !bytes.HasPrefix(d[j:], []byte(mid)) {
		return 0, value{}, false
	}
	key := d[i:j]
	i = j + len(mid)
	k := plainEnd(d, i)
	if k < 0 || k+2 > len(d) || d[k+1] != ':' {
		return 0, value{}, false
	}
	typ := d[i:k]
	i = k + 2
	var v value
	switch string(typ) {
	case "stringValue":
		if i >= len(d) || d[i] != '"' {
			return 0, value{}, false
		}
		e := plainEnd(d, i+1)
		if e < 0 {
			return 0, value{}, false
		}
		b := d[i+1 : e]
		idx := index(key)
		if idx != 0 {
			if str(idx) {
				v = value{kind: 's', str: f.internBytes(b), hasStr: true}
			} else if n, ok := parseDecimal(b); ok && n <= math.MaxInt64 {
				v = value{kind: 'i', i: int64(n), str: string(b), hasStr: true}
			} else {
				v = value{kind: 's', str: string(b), hasStr: true}
			}
		}
		i = e + 1
		if !bytes.HasPrefix(d[i:], []byte("}}")) {
			return 0, value{}, false
		}
		f.i = i + 2
		return idx, v, true
	case "intValue":
		var txt []byte
		neg := false
		if i < len(d) && d[i] == '"' { // "123" or "-123"
			e := bytes.IndexByte(d[i+1:], '"')
			if e < 0 {
				return 0, value{}, false
			}
			txt = d[i+1 : i+1+e]
			i += e + 2
			if neg = len(txt) > 0 && txt[0] == '-'; neg {
				txt = txt[1:]
			}
		} else { // a JSON integer: no sign here, no leading zero
			e := i
			for e < len(d) && d[e] >= '0' && d[e] <= '9' {
				e++
			}
			txt = d[i:e]
			i = e
			if len(txt) > 1 && txt[0] == '0' {
				return 0, value{}, false
			}
		}
		n, ok := parseDecimal(txt)
		if !ok || n > math.MaxInt64 {
			return 0, value{}, false
		}
		if !bytes.HasPrefix(d[i:], []byte("}}")) {
			return 0, value{}, false
		}
		idx := index(key)
		x := int64(n)
		if neg {
			x = -x
		}
		f.i = i + 2
		return idx, value{kind: 'i', i: x, hasStr: true}, true
	}
	return 0, value{}, false
}

// plainEnd returns the index of the quote closing the string whose
// contents start at d[i], or -1 when they hold a backslash, a control
// character or non-ASCII (the general path handles those).
func plainEnd(d []byte, i int) int {
	for ; i < len(d); i++ {
		switch c := d[i]; {
		case c == '"':
			return i
		case c == '\\' || c < 0x20 || c >= 0x80:
			return -1
		}
	}
	return -1
}

// skipAnyValue validates an AnyValue object it does not need.
func (f *fastDecoder) skipAnyValue() error {
	n := 0
	return f.object(func(k []byte) error {
		if n++; n > 1 {
			return f.fail()
		}
		switch string(k) {
		case "stringValue", "string_value", "intValue", "int_value", "boolValue", "bool_value",
			"arrayValue", "array_value", "kvlistValue", "kvlist_value", "bytesValue", "bytes_value":
			return f.skip()
		case "doubleValue", "double_value":
			if f.peek() == '"' {
				return f.fail()
			}
			return f.skip()
		}
		return f.fail()
	})
}

// anyValue reads an AnyValue object; wantStr interns a string value (else
// it is kept only to be parsed as an integer).
func (f *fastDecoder) anyValue(wantStr bool) (value, error) {
	v := value{hasStr: true} // an empty value's AsString is ""
	err := f.object(func(k []byte) error {
		if v.kind != 0 { // two values in one: pdata's business
			return f.fail()
		}
		v.hasStr = false
		switch string(k) {
		case "stringValue", "string_value":
			b, err := f.rawString()
			if err != nil {
				return err
			}
			v = value{kind: 's', hasStr: true}
			if wantStr {
				v.str = f.internBytes(b)
			} else if n, ok := parseDecimal(b); ok && n <= math.MaxInt64 && len(b) > 0 {
				v.kind, v.i = 'i', int64(n) // a number written as a string: what asInt would make of it
				v.str = string(b)
			} else {
				v.str = string(b)
			}
			return nil
		case "intValue", "int_value":
			n, err := f.int64Field()
			v = value{kind: 'i', i: n, hasStr: true} // str made on demand
			return err
		case "doubleValue", "double_value":
			if f.peek() == '"' { // "NaN", "Infinity", or a quoted number
				return f.fail()
			}
			txt, _, err := f.number()
			if err != nil {
				return err
			}
			d, perr := strconv.ParseFloat(string(txt), 64)
			if perr != nil || math.IsInf(d, 0) {
				return f.fail()
			}
			v = value{kind: 'd', d: d}
			return nil
		case "boolValue", "bool_value":
			switch f.peek() {
			case 't':
				v = value{kind: 'b', i: 1, str: "true", hasStr: true}
				return f.literal("true")
			case 'f':
				v = value{kind: 'b', str: "false", hasStr: true}
				return f.literal("false")
			}
			return f.fail()
		case "arrayValue", "array_value", "kvlistValue", "kvlist_value", "bytesValue", "bytes_value":
			v = value{kind: 'x'}
			return f.skip()
		}
		return f.fail()
	})
	return v, err
}

// internBytes returns b as an interned string.
func (f *fastDecoder) internBytes(b []byte) string {
	if s, ok := f.intern[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(f.intern) < 1<<16 {
		f.intern[s] = s
	}
	return s
}

func spanAttrIndex(k []byte) int  { return attrIndexOf(k) }
func spanAttrString(idx int) bool { return attrIsString[idx] }

// id reads a hex id of n bytes into dst; the empty string is the zero id.
func (f *fastDecoder) id(dst []byte) error {
	b, err := f.rawString()
	if err != nil {
		return err
	}
	if len(b) == 0 {
		clear(dst)
		return nil
	}
	if len(b) != 2*len(dst) {
		return f.fail()
	}
	if _, err := hex.Decode(dst, b); err != nil {
		return f.fail()
	}
	return nil
}

// span reads one span; mptx's are appended to f.out, the others only
// counted.
func (f *fastDecoder) span() error {
	f.spans++
	f.out = append(f.out, spanRec{})
	r := &f.out[len(f.out)-1]
	var name []byte
	var statusCode int64
	var statusMsg string
	var events []rawEvent
	err := f.object(func(key []byte) error {
		switch string(key) {
		case "traceId", "trace_id":
			return f.id(r.trace[:])
		case "spanId", "span_id":
			return f.id(r.span[:])
		case "parentSpanId", "parent_span_id":
			var p pcommon.SpanID
			return f.id(p[:])
		case "traceState", "trace_state":
			_, err := f.rawString()
			return err
		case "flags":
			_, err := f.uintField(math.MaxUint32)
			return err
		case "name":
			b, err := f.rawString()
			if err != nil {
				return err
			}
			name = append(name[:0], b...)
			return nil
		case "kind":
			if f.peek() == '"' { // enum names: pdata's business
				return f.fail()
			}
			k, err := f.int64Field()
			if err == nil && (k < math.MinInt32 || k > math.MaxInt32) {
				return f.fail()
			}
			return err
		case "startTimeUnixNano", "start_time_unix_nano":
			v, err := f.uint64Field()
			r.start = pcommon.Timestamp(v)
			return err
		case "endTimeUnixNano", "end_time_unix_nano":
			v, err := f.uint64Field()
			r.end = pcommon.Timestamp(v)
			return err
		case "attributes":
			return f.array(func() error {
				idx, v, err := f.kvPair(spanAttrIndex, spanAttrString)
				if err != nil {
					return err
				}
				if idx != 0 && !r.setIdx(idx, v) {
					return f.fail()
				}
				return nil
			})
		case "events":
			return f.array(func() error {
				e, keep, err := f.event()
				if err == nil && keep {
					events = append(events, e)
				}
				return err
			})
		case "links":
			return f.skip()
		case "status":
			return f.object(func(k []byte) error {
				switch string(k) {
				case "code":
					if f.peek() == '"' {
						return f.fail()
					}
					c, err := f.int64Field()
					if err == nil && (c < math.MinInt32 || c > math.MaxInt32) {
						return f.fail()
					}
					statusCode = c
					return err
				case "message":
					b, err := f.rawString()
					statusMsg = f.internBytes(b)
					return err
				}
				return f.fail()
			})
		case "droppedAttributesCount", "dropped_attributes_count", "droppedEventsCount", "dropped_events_count",
			"droppedLinksCount", "dropped_links_count":
			_, err := f.uintField(math.MaxUint32)
			return err
		}
		return f.fail()
	})
	if err != nil {
		return err
	}
	switch string(name) {
	case schema.SpanTransfer:
		r.kind = recTransfer
	case schema.SpanChunk:
		r.kind = recChunk
	case schema.SpanReceive:
		r.kind = recReceive
	case schema.SpanRecvChunk:
		r.kind = recRecvChunk
	default:
		f.out = f.out[:len(f.out)-1]
		return nil
	}
	if r.kind != recTransfer {
		events = nil
	}
	if r.check(string(name), statusCode, statusMsg, events) != nil {
		return f.fail() // pdata's path reports it
	}
	return nil
}

// Indices of the event attributes the analysis reads.
const (
	eOther = iota
	ePath
	eCNPCount
	ePause
	eBackoff
	eChunk
)

func eventAttrIndex(k []byte) int {
	switch string(k) {
	case schema.AttrPath:
		return ePath
	case schema.AttrCNPCount:
		return eCNPCount
	case schema.AttrPauseNs:
		return ePause
	case schema.AttrBackoff:
		return eBackoff
	case schema.AttrChunkIndex:
		return eChunk
	}
	return eOther
}

// event reads a span event; keep reports whether the analysis uses it.
func (f *fastDecoder) event() (rawEvent, bool, error) {
	var e rawEvent
	var attrs [8]struct {
		idx int
		v   value
	}
	na := 0
	err := f.object(func(k []byte) error {
		switch string(k) {
		case "timeUnixNano", "time_unix_nano":
			v, err := f.uint64Field()
			e.at = pcommon.Timestamp(v)
			return err
		case "name":
			b, err := f.rawString()
			e.name = f.internBytes(b)
			return err
		case "attributes":
			return f.array(func() error {
				idx, v, err := f.kvPair(eventAttrIndex, func(int) bool { return false })
				if err != nil || idx == 0 {
					return err
				}
				if na == len(attrs) { // more than the analysis reads: pdata's
					return f.fail()
				}
				attrs[na].idx, attrs[na].v = idx, v
				na++
				return nil
			})
		case "droppedAttributesCount", "dropped_attributes_count":
			_, err := f.uintField(math.MaxUint32)
			return err
		}
		return f.fail()
	})
	if err != nil {
		return e, false, err
	}
	switch e.name {
	case schema.EventCNPBurst, schema.EventPFCPause, schema.EventPathDown, schema.EventPathUp, schema.EventPathQuarantine, schema.EventRequeue:
	default:
		return e, false, nil
	}
	get := func(idx int) (int64, bool) {
		// The first value of a key, as pcommon.Map.Get finds it.
		for i := range attrs[:na] {
			if attrs[i].idx == idx {
				return attrs[i].v.asInt()
			}
		}
		return 0, false
	}
	p, _ := get(ePath)
	e.path = int(p)
	switch e.name {
	case schema.EventCNPBurst:
		e.count, _ = get(eCNPCount)
	case schema.EventPFCPause:
		d, _ := get(ePause)
		e.dur = time.Duration(d)
	case schema.EventPathQuarantine:
		d, _ := get(eBackoff)
		e.dur = time.Duration(d)
	case schema.EventRequeue:
		e.count, _ = get(eChunk)
	}
	return e, true, nil
}

// Indices of the span attributes the analysis reads (attrIndex); 0 is
// any other.
const (
	aOther = iota
	aTransferID
	aTransferBytes
	aChunkSize
	aTransferChunks
	aPaths
	aCC
	aBackend
	aPeer
	aName
	aOutcome
	aErrorType
	aRecvChunks
	aRecvDuplicates
	aRecvQueueMax
	aRecvHandoffSum
	aRecvLastArrival
	aRecvLag
	aChunkIndex
	aPath
	aAttempt
	aChunkBytes
	aChunkECN
	aQPN
	aChunkRTT
	aDevice
	aNIC
	aRecvQueue
	aRecvWait
	aRecvHandoff
	aCount
)

// attrIndexOf returns the index of span attribute k, 0 for one the
// analysis does not read. A switch, not a map: it runs for every attribute
// of every span.
func attrIndexOf(k []byte) int {
	switch string(k) {
	case schema.AttrTransferID:
		return aTransferID
	case schema.AttrTransferBytes:
		return aTransferBytes
	case schema.AttrChunkSize:
		return aChunkSize
	case schema.AttrTransferChunks:
		return aTransferChunks
	case schema.AttrPaths:
		return aPaths
	case schema.AttrCC:
		return aCC
	case schema.AttrBackend:
		return aBackend
	case schema.AttrNetworkPeerAddress:
		return aPeer
	case schema.AttrTransferName:
		return aName
	case schema.AttrTransferOutcome, schema.AttrChunkOutcome:
		return aOutcome
	case schema.AttrErrorType:
		return aErrorType
	case schema.AttrRecvChunks:
		return aRecvChunks
	case schema.AttrRecvDuplicates:
		return aRecvDuplicates
	case schema.AttrRecvQueueMax:
		return aRecvQueueMax
	case schema.AttrRecvHandoffSum:
		return aRecvHandoffSum
	case schema.AttrRecvLastArrival:
		return aRecvLastArrival
	case schema.AttrRecvLag:
		return aRecvLag
	case schema.AttrChunkIndex:
		return aChunkIndex
	case schema.AttrPath:
		return aPath
	case schema.AttrAttempt:
		return aAttempt
	case schema.AttrChunkBytes:
		return aChunkBytes
	case schema.AttrChunkECN:
		return aChunkECN
	case schema.AttrQPN:
		return aQPN
	case schema.AttrChunkRTT:
		return aChunkRTT
	case schema.AttrDevice:
		return aDevice
	case schema.AttrNIC:
		return aNIC
	case schema.AttrRecvQueue:
		return aRecvQueue
	case schema.AttrRecvWait:
		return aRecvWait
	case schema.AttrRecvHandoff:
		return aRecvHandoff
	}
	return aOther
}

// attrIsString marks the attributes read as strings.
var attrIsString = [aCount]bool{aCC: true, aBackend: true, aPeer: true, aName: true, aOutcome: true, aErrorType: true, aDevice: true, aNIC: true}

// setAttr applies one span attribute (pdata's decoder).
func (r *spanRec) setAttr(k string, v value) bool { return r.setIdx(attrIndexOf([]byte(k)), v) }

// setIdx applies attribute idx; both decoders use it. It reports false
// when the value's string form is needed and unknown (the fast decoder
// then hands the line to pdata).
func (r *spanRec) setIdx(idx int, v value) bool {
	if attrIsString[idx] {
		s, ok := v.asString()
		if !ok {
			return false
		}
		switch idx {
		case aCC:
			r.cc = s
		case aBackend:
			r.backend = s
		case aPeer:
			r.peer = s
		case aName:
			r.name = s
		case aOutcome:
			r.outcome = s
		case aErrorType:
			r.errType = s
		case aDevice:
			r.device = s
		case aNIC:
			r.nic = s
		}
		return true
	}
	n, ok := v.asInt()
	switch idx {
	case aTransferID:
		r.id, r.hasID = n, ok
	case aTransferBytes:
		r.bytes = n
	case aChunkSize:
		r.chunkSize = n
	case aTransferChunks:
		r.chunks = n
	case aPaths:
		r.paths = n
	case aRecvChunks:
		r.recvChunks = n
	case aRecvDuplicates:
		r.dups = n
	case aRecvQueueMax:
		r.queueMax = n
	case aRecvHandoffSum:
		r.handoffSum = n
	case aRecvLastArrival:
		r.lastArrival, r.hasArrival = n, ok
	case aRecvLag:
		r.lag = n
	case aChunkIndex:
		r.index = n
	case aPath:
		r.path, r.hasPath = n, ok
	case aAttempt:
		r.attempt = n
	case aChunkBytes:
		r.chunkBytes = n
	case aChunkECN:
		r.ecn = n
	case aQPN:
		r.qpn = n
	case aChunkRTT:
		r.rtt = n
	case aRecvQueue:
		r.queue = n
	case aRecvWait:
		r.wait = n
	case aRecvHandoff:
		r.handoff = n
	}
	return true
}
