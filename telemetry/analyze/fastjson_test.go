package analyze

import (
	"bytes"
	"os"
	"reflect"
	"testing"
)

// pdataRecords is the reference: pdata's unmarshaler, then extract.
func pdataRecords(doc []byte) ([]spanRec, int, error) {
	td, err := parseDoc(doc)
	if err != nil {
		return nil, 0, err
	}
	return extract(td, nil)
}

// checkFast requires the fast decoder to agree with pdata whenever it
// accepts doc (it may decline anything; decodeLine then uses pdata).
func checkFast(t *testing.T, doc []byte, mustAccept bool) {
	t.Helper()
	fd := newFastDecoder()
	got, gotSpans, err := fd.decode(doc)
	want, wantSpans, werr := pdataRecords(doc)
	if err != nil {
		if mustAccept {
			t.Fatalf("fast decoder declined %.120q: %v", doc, err)
		}
		return
	}
	if werr != nil {
		t.Fatalf("fast decoder accepted what pdata refuses (%v): %.200q", werr, doc)
	}
	if gotSpans != wantSpans || len(got) != len(want) {
		t.Fatalf("fast decoder: %d spans, %d records; pdata: %d spans, %d records", gotSpans, len(got), wantSpans, len(want))
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("record %d differs:\n fast:  %+v\n pdata: %+v", i, got[i], want[i])
		}
	}
}

// TestFastDecoderMatchesPdata runs every line of the committed traces and
// of generated both-ends traces through both decoders.
func TestFastDecoderMatchesPdata(t *testing.T) {
	data, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if signal(line) != "traces" {
			continue
		}
		checkFast(t, line, true)
		n++
		// Jaeger's wrapping, and the same document pretty-printed.
		checkFast(t, append(append([]byte(`{"result":`), line...), '}'), true)
	}
	if n == 0 {
		t.Fatal("no trace lines")
	}
	for _, doc := range fastSeeds {
		checkFast(t, []byte(doc), false)
	}
}

// fastSeeds are documents exercising the decoder's corners.
var fastSeeds = []string{
	`{"resourceSpans":[]}`,
	`{"resource_spans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"a\u00e9\"b"}}]},"scope_spans":[{"spans":[{"trace_id":"01000000000000000000000000000000","span_id":"0100000000000000","name":"mptx.chunk","start_time_unix_nano":5,"end_time_unix_nano":"9","attributes":[{"key":"mptx.transfer.id","value":{"intValue":3}},{"key":"mptx.path","value":{"stringValue":"2"}},{"key":"mptx.device","value":{"intValue":"7"}},{"key":"error.type","value":{"stringValue":"x\n\ty"}}]}]}]}]}`,
	`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"","spanId":"","name":"mptx.transfer","attributes":[{"key":"mptx.transfer.id","value":{"doubleValue":4.5}},{"key":"mptx.transfer.outcome","value":{"stringValue":"failed"}}],"status":{"code":2,"message":"boom"},"events":[{"name":"mptx.path.down","timeUnixNano":"7","attributes":[{"key":"mptx.path","value":{"intValue":"1"}},{"key":"mptx.path","value":{"intValue":"2"}}]}]}]}]}]}`,
	`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"other","attributes":[{"key":"k","value":{"arrayValue":{"values":[{"intValue":"1"}]}}}]}]}]}]}`,
	`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"mptx.recv.chunk","attributes":[{"key":"mptx.transfer.id","value":{"intValue":"1"}},{"key":"mptx.recv.queue_ns","value":{"intValue":"-1"}}]}]}]}]}`,
	`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"mptx.receive","attributes":[{"key":"mptx.transfer.id","value":{"intValue":"1"}},{"key":"mptx.transfer.id","value":{"boolValue":true}}]}]}]}]}`,
	`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"doubleValue":1}}]},"scopeSpans":[]}]}`,
	`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"mptx.chunk","kind":"SPAN_KIND_CLIENT"}]}]}]}`,
	`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"mptx.chunk","flags":4294967296}]}]}]}`,
	`{"resourceSpans":[]} x`,
	`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"mptx.chunk","startTimeUnixNano":"1e3"}]}]}]}`,
}

// FuzzFastDecoder: on arbitrary input the fast decoder never panics and,
// whenever it accepts a document, agrees with pdata exactly.
func FuzzFastDecoder(f *testing.F) {
	data, err := os.ReadFile(input)
	if err != nil {
		f.Fatal(err)
	}
	for i, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if i < 4 && signal(line) == "traces" {
			f.Add(line)
		}
	}
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if len(doc) > 1<<16 {
			return
		}
		checkFast(t, doc, false)
	})
}
