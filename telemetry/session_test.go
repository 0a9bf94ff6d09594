package telemetry_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/telemetry"
	"github.com/mptx-dev/mptx/telemetry/analyze"
	"github.com/mptx-dev/mptx/telemetry/schema"
)

// TestSessionBothEnds: a session with Config.Telemetry at both ends (two
// services writing one trace file) records, for every tensor, the sender's
// mptx.transfer span and the receiver's mptx.receive span in the same
// trace, the receive span a child of the transfer span.
func TestSessionBothEnds(t *testing.T) {
	file := filepath.Join(t.TempDir(), "trace.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tel, err := telemetry.Setup(ctx, telemetry.SetupConfig{ServiceName: "both", TraceFile: file, SyncExport: true})
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("0123456789abcdef-test-secret")
	hook := telemetry.Sessions{T: tel}
	ln, err := mptx.Listen("127.0.0.1:0", mptx.Config{Secret: secret, RegionSize: 32 << 20, Telemetry: hook})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan error, 1)
	go func() {
		s, err := ln.Accept(ctx)
		if err != nil {
			got <- err
			return
		}
		defer s.Close()
		for range 3 {
			tn, err := s.Recv(ctx)
			if err != nil {
				got <- err
				return
			}
			tn.Release()
		}
		got <- nil
	}()
	s, err := mptx.Dial(ctx, ln.Addr().String(), mptx.Config{Secret: secret, Paths: 2, SendBuffer: 32 << 20, Telemetry: hook})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.Send(ctx, "t"+string(rune('0'+i)), make([]byte, (i+1)<<20)); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	s.Close()
	time.Sleep(50 * time.Millisecond) // the receiving end's Close runs on its loop
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	td, err := analyze.ReadFiles(file)
	if err != nil {
		t.Fatal(err)
	}
	transfers := map[string]string{} // trace id → span id of mptx.transfer
	var receives [][2]string         // trace id, parent span id
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				switch sp.Name() {
				case schema.SpanTransfer:
					transfers[sp.TraceID().String()] = sp.SpanID().String()
				case schema.SpanReceive:
					receives = append(receives, [2]string{sp.TraceID().String(), sp.ParentSpanID().String()})
				}
			}
		}
	}
	if len(transfers) != 3 || len(receives) != 3 {
		t.Fatalf("%d transfer spans and %d receive spans, want 3 and 3", len(transfers), len(receives))
	}
	for _, r := range receives {
		if parent, ok := transfers[r[0]]; !ok || parent != r[1] {
			t.Errorf("receive span in trace %s with parent %s; the sender's transfer span there is %q", r[0], r[1], parent)
		}
	}
}
