package analyze

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
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
