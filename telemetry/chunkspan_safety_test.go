package telemetry

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The SDK version whose sdktrace.ReadWriteSpan the chunk spans were
// checked against (go.mod pins it). The interface is sealed by an
// unexported method, which chunkSpan can only satisfy by embedding a
// (nil) ReadWriteSpan; every other method must be chunkSpan's own, or a
// call to it nil-panics inside an exporter.
const pinnedSDK = "v1.47.0"

// readWriteSpanMethods is sdktrace.ReadWriteSpan's exported method set at
// pinnedSDK. A new SDK that adds a method changes it: then implement the
// method on chunkSpan, check it in TestChunkSpanCallsEveryMethod, and
// update this list and pinnedSDK.
var readWriteSpanMethods = []string{
	"AddEvent", "AddLink", "Attributes", "ChildSpanCount", "DroppedAttributes", "DroppedEvents", "DroppedLinks",
	"End", "EndTime", "Events", "InstrumentationLibrary", "InstrumentationScope", "IsRecording", "Links", "Name",
	"Parent", "RecordError", "Resource", "SetAttributes", "SetName", "SetStatus", "SpanContext", "SpanKind",
	"StartTime", "Status", "TracerProvider",
}

// TestSDKPinned fails when the SDK in the build is not the one the chunk
// spans were checked against, or its span interface changed.
func TestSDKPinned(t *testing.T) {
	// Test binaries carry no dependency versions: read go.mod.
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	found := ""
	for _, line := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "go.opentelemetry.io/otel/sdk" {
			found = f[1]
		} else if len(f) >= 3 && f[0] == "require" && f[1] == "go.opentelemetry.io/otel/sdk" {
			found = f[2]
		}
	}
	if found != pinnedSDK {
		t.Errorf("go.opentelemetry.io/otel/sdk is %q, the chunk spans were checked against %s: run TestChunkSpanCallsEveryMethod, review sdktrace.ReadWriteSpan, then update pinnedSDK", found, pinnedSDK)
	}
	typ := reflect.TypeFor[sdktrace.ReadWriteSpan]()
	var got []string
	for i := range typ.NumMethod() {
		if m := typ.Method(i); m.IsExported() {
			got = append(got, m.Name)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, readWriteSpanMethods) {
		t.Errorf("sdktrace.ReadWriteSpan's methods changed:\n got  %v\n want %v\nimplement the new ones on chunkSpan (it embeds a nil ReadWriteSpan: an unimplemented method nil-panics)", got, readWriteSpanMethods)
	}
}

// TestChunkSpanCallsEveryMethod calls every method of
// sdktrace.ReadWriteSpan on chunk spans (sender's and receiver's, before
// and after they end) with zero or plausible arguments: a method the
// embedded nil interface would answer panics here, not in an exporter.
func TestChunkSpanCallsEveryMethod(t *testing.T) {
	src := &spanSource{paths: [][]attribute.KeyValue{{attribute.Int("mptx.path", 0)}}}
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	spans := map[string]*chunkSpan{
		"sender":   {src: src, parent: parent, id: trace.SpanID{3}, start: epoch, end: epoch.Add(time.Millisecond), outcome: "acked"},
		"receiver": {src: src, parent: parent, id: trace.SpanID{4}, start: epoch, end: epoch.Add(time.Millisecond), recv: true, reason: "handoff rejected"},
	}
	typ := reflect.TypeFor[sdktrace.ReadWriteSpan]()
	for name, sp := range spans {
		for _, ended := range []bool{false, true} {
			sp.ended = ended
			v := reflect.ValueOf(sdktrace.ReadWriteSpan(sp))
			for i := range typ.NumMethod() {
				m := typ.Method(i)
				if !m.IsExported() {
					continue
				}
				args := make([]reflect.Value, m.Type.NumIn())
				for j := range args {
					at := m.Type.In(j)
					args[j] = reflect.Zero(at)
					switch {
					case at.Kind() == reflect.String:
						args[j] = reflect.ValueOf("x").Convert(at)
					case at == reflect.TypeFor[error]():
						args[j] = reflect.ValueOf(fmt.Errorf("boom"))
					}
				}
				var call func([]reflect.Value) []reflect.Value
				if m.Type.IsVariadic() {
					call = v.Method(i).CallSlice
				} else {
					call = v.Method(i).Call
				}
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Errorf("%s span (ended %v): %s panics (%v): chunkSpan must implement it", name, ended, m.Name, strings.SplitN(fmt.Sprint(r), "\n", 2)[0])
						}
					}()
					call(args)
				}()
			}
		}
	}
}
