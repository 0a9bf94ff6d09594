package analyze

import (
	"bytes"
	"encoding/hex"
	"math"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/mptx-dev/mptx/telemetry/schema"
)

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
