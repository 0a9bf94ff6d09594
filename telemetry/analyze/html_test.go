package analyze

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mptx-dev/mptx/internal/browsertest"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/telemetry"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

var screenshot = flag.String("screenshot", "", "write the HTML timeline's browser screenshot to this file (docs/telemetry-timeline.png)")

// timelineScenario records one transfer through the real recorders: four
// paths, path 3 idle for its first 60 ms (a slow queue pair bring-up: the
// start-up gap), path 1 down at 19 ms with a chunk in flight (requeued)
// and back at 40 ms, CNP bursts on path 0, and a receiver whose last
// hand-offs are slow; a second, short transfer follows. It returns the
// OTLP JSON lines.
func timelineScenario(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	ctx := context.Background()
	exp, err := telemetry.NewFileSpanExporter(ctx, &buf)
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(&seqIDs{}),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "mptx-send"))))
	rtp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(&seqIDs{n: 1 << 32}),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "mptx-recv"))))
	paths := make([]telemetry.PathAttr, 4)
	for i := range paths {
		paths[i] = telemetry.PathAttr{Device: "mlx5_" + string(rune('0'+i)), QPN: uint32(0x300 + i), NIC: "eth" + string(rune('0'+i))}
	}
	wall := telemetry.FixedEpoch(epoch)
	rec, err := telemetry.NewRecorder(telemetry.Config{TracerProvider: tp, Wall: wall, CC: "dcqcn", Backend: "verbs", Peer: "10.0.1.9", Paths: paths, Synchronous: true})
	if err != nil {
		t.Fatal(err)
	}
	rrec, err := telemetry.NewReceiveRecorder(telemetry.ReceiveConfig{TracerProvider: rtp, Wall: wall, Backend: "verbs", Peer: "10.0.1.1", Paths: paths, Synchronous: true})
	if err != nil {
		t.Fatal(err)
	}
	ms := func(f float64) vtime.Time { return vtime.Time(f * float64(time.Millisecond)) }
	ev := func(e multipath.Event) { rec.Record(&e) }
	type ack struct {
		chunk uint32
		path  int
		at    vtime.Time
	}
	run := func(id multipath.TransferID, start vtime.Time, chunks int, scale float64, faults bool) {
		const size = 4 * units.MiB
		tc := rec.BeginTransfer(ctx, start, id, "layer7.attention")
		ev(multipath.Event{Kind: multipath.EvTransferStart, Now: start, Transfer: id, Bytes: size * units.Bytes(chunks), Chunk: uint32(chunks), Size: size})
		_ = rrec.Expect(start, id, size*units.Bytes(chunks), uint32(chunks), size, tc)
		// Per path: time per chunk (ms) and when it may start.
		per := []float64{2 * scale, 2.5 * scale, 3 * scale, 2 * scale}
		free := []vtime.Time{start, start, start, start}
		if faults {
			free[3] = start + ms(60) // start-up gap
		}
		var acks []ack
		next := uint32(0)
		var requeued []uint32
		attempt := map[uint32]uint16{}
		for len(acks) < chunks {
			// The path free first takes the next chunk.
			p := 0
			for i := range free {
				if free[i] < free[p] {
					p = i
				}
			}
			if faults && p == 1 && free[1] >= start+ms(19) && free[1] < start+ms(40) {
				free[1] = start + ms(40) // down until 40 ms
				continue
			}
			var c uint32
			switch {
			case len(requeued) > 0:
				c, requeued = requeued[0], requeued[1:]
			case int(next) < chunks:
				c = next
				next++
			default:
				free[p] = 1 << 62
				continue
			}
			attempt[c]++
			s := free[p]
			d := ms(per[p])
			ev(multipath.Event{Kind: multipath.EvChunkStart, Now: s, Transfer: id, Chunk: c, Path: p, Attempt: attempt[c], Bytes: size})
			if faults && p == 1 && s < start+ms(19) && s+d > start+ms(19) {
				down := start + ms(19)
				ev(multipath.Event{Kind: multipath.EvChunkRequeue, Now: down, Transfer: id, Chunk: c, Path: 1, Attempt: attempt[c], Reason: "retry-exceeded"})
				ev(multipath.Event{Kind: multipath.EvPathDown, Now: down, Path: 1, Reason: "retry-exceeded"})
				ev(multipath.Event{Kind: multipath.EvPathQuarantine, Now: down, Path: 1, Reason: "retry-exceeded", Latency: time.Millisecond})
				ev(multipath.Event{Kind: multipath.EvPathUp, Now: start + ms(40), Path: 1})
				requeued = append(requeued, c)
				free[1] = start + ms(40)
				continue
			}
			done := s + d
			var ecn uint64
			if faults && p == 0 && c%3 == 0 {
				ecn = 2
				ev(multipath.Event{Kind: multipath.EvCNP, Now: done, Path: 0, ECN: 4})
			}
			ev(multipath.Event{Kind: multipath.EvChunkDone, Now: done, Transfer: id, Chunk: c, Path: p, Attempt: attempt[c], Bytes: size,
				RTT: 12 * time.Microsecond, Latency: time.Duration(d), ECN: ecn})
			acks = append(acks, ack{c, p, done})
			free[p] = done
		}
		end := start
		for _, a := range acks {
			end = max(end, a.at)
		}
		ev(multipath.Event{Kind: multipath.EvTransferDone, Now: end, Transfer: id, Bytes: size * units.Bytes(chunks)})
		// The receiver: arrivals 6 µs before each ack; the hand-offs of the
		// last chunks are slow.
		var handFree vtime.Time
		for i, a := range acks {
			arr := a.at - vtime.Time(6*time.Microsecond)
			h := 200 * time.Microsecond
			if faults && i >= len(acks)-3 {
				h = 4 * time.Millisecond
			}
			hs := max(arr+vtime.Time(2*time.Microsecond), handFree)
			handFree = hs.Add(h)
			c := telemetry.RecvChunk{Transfer: id, Index: a.chunk, Path: a.path, Bytes: size, Arrived: arr, Polled: arr + vtime.Time(2*time.Microsecond),
				HandoffStart: hs, HandoffEnd: handFree}
			rrec.Chunk(&c)
		}
		rrec.Done(handFree, id, "")
	}
	run(11, ms(1), 100, 1, true)
	run(12, ms(200), 16, 0.5, false)
	rec.Close(ms(300))
	rrec.Close(ms(300))
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rtp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func scenarioTransfers(t testing.TB) []*Transfer {
	t.Helper()
	td, err := Parse(timelineScenario(t), "scenario")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Analyze(td, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Transfers) != 2 {
		t.Fatalf("scenario: %d transfers, want 2", len(rep.Transfers))
	}
	return rep.Transfers
}

// TestTimelineHTMLPage checks the page without a browser: self-contained,
// carrying the transfers' bars, markers, gaps and receiver.
func TestTimelineHTMLPage(t *testing.T) {
	ts := scenarioTransfers(t)
	var page bytes.Buffer
	if err := TimelineHTML(&page, ts); err != nil {
		t.Fatal(err)
	}
	s := page.String()
	for _, bad := range []string{"http://", "https://", "<script src", "<link", "@import", "url("} {
		if strings.Contains(s, bad) {
			t.Errorf("page holds %q: it must load nothing", bad)
		}
	}
	h, err := htmlOf(ts[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Bars) != len(ts[0].Attempts) || len(h.Rows) != 4 || !h.Rows[3].Gap || h.Rows[0].Gap || h.Receiver == nil || h.Receiver.Lag < int64(8*time.Millisecond) {
		t.Errorf("layout: %d bars (attempts %d), rows %+v, receiver %+v", len(h.Bars), len(ts[0].Attempts), h.Rows, h.Receiver)
	}
	kinds := map[int64]int{}
	for _, e := range h.Events {
		kinds[e[2]]++
	}
	for k, name := range []string{"down", "up", "quarantine", "requeue", "cnp"} {
		if kinds[int64(k)] == 0 {
			t.Errorf("no %s marker in %v", name, kinds)
		}
	}
	// Limits.
	many := make([]*Transfer, MaxHTMLTransfers+1)
	for i := range many {
		many[i] = ts[1]
	}
	if err := TimelineHTML(&bytes.Buffer{}, many); err == nil || !strings.Contains(err.Error(), "at most 100") {
		t.Errorf("%d transfers: %v, want the limit", len(many), err)
	}
	wide := &Transfer{ID: 1}
	for p := range MaxHTMLRows + 1 {
		wide.Attempts = append(wide.Attempts, Attempt{Path: p, End: 1, Outcome: "acked"})
	}
	if err := TimelineHTML(&bytes.Buffer{}, []*Transfer{wide}); err == nil || !strings.Contains(err.Error(), "at most 4096") {
		t.Errorf("%d paths: %v, want the row limit", MaxHTMLRows+1, err)
	}
	if err := Timeline(&bytes.Buffer{}, wide, "png", 0, 0); err == nil || !strings.Contains(err.Error(), "at most 256") {
		t.Errorf("%d paths as PNG: %v, want the row limit", MaxHTMLRows+1, err)
	}
	if err := TimelineHTML(&bytes.Buffer{}, nil); err == nil {
		t.Errorf("no transfers: no error")
	}
}

// FuzzTimeline: arbitrary trace input and sizes through the whole
// renderer, PNG excepted (its cost is bounded by the size limits, checked
// here, not its speed): an error or a page, never a panic.
func FuzzTimeline(f *testing.F) {
	data, err := os.ReadFile(input)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data, 0.0, 0.0)
	f.Add([]byte(fastSeeds[2]), 1e6, 2.0)
	f.Add([]byte(fastSeeds[1]), -1.0, 3.0)
	f.Fuzz(func(t *testing.T, doc []byte, w, h float64) {
		td, err := Parse(doc, "fuzz")
		if err != nil {
			return
		}
		rep, err := Analyze(td, Options{})
		if err != nil {
			return
		}
		if len(rep.Transfers) > MaxHTMLTransfers {
			rep.Transfers = rep.Transfers[:MaxHTMLTransfers]
		}
		var page bytes.Buffer
		if err := TimelineHTML(&page, rep.Transfers); err == nil && !bytes.Contains(page.Bytes(), []byte(`id="mptx-data"`)) {
			t.Fatal("a page without its data")
		}
		for _, tr := range rep.Transfers {
			width, height, err := checkImageSize(w, h, len(tr.PerPath))
			if err == nil && (width > MaxImageSide*72 || height > MaxImageSide*72 || float64(width*height) > MaxImageArea*72*72) {
				t.Fatalf("size %v × %v accepted beyond the limits", width, height)
			}
			if err := Timeline(&bytes.Buffer{}, tr, "svg", w, h); err != nil {
				continue
			}
		}
	})
}

// TestTimelineInBrowser loads the HTML timeline in headless Chromium: no
// console error, every bar drawn, the markers and the start-up gap drawn,
// hovering a bar names its chunk, zooming narrows the view, the second
// transfer can be selected, and nothing is fetched from the network. It
// saves a screenshot (-screenshot FILE keeps it, for docs/).
func TestTimelineInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a browser")
	}
	ts := scenarioTransfers(t)
	page := filepath.Join(t.TempDir(), "timeline.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := TimelineHTML(f, ts); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	p := browsertest.Open(t, page, 1400, 560)
	var st struct {
		DrawnBars   int     `json:"drawnBars"`
		DrawnEvents int     `json:"drawnEvents"`
		DrawnGaps   int     `json:"drawnGaps"`
		X0          float64 `json:"x0"`
		X1          float64 `json:"x1"`
	}
	p.Eval(`window.mptxTimeline.state`, &st)
	if st.DrawnBars != len(ts[0].Attempts) || st.DrawnEvents == 0 || st.DrawnGaps != 1 {
		t.Errorf("drawn: %+v; want %d bars, markers and one start-up gap", st, len(ts[0].Attempts))
	}
	var tip, gap, recv string
	p.Eval(`(() => { const t = window.mptxTimeline.data[0]; const b = t.bars.find(b => b[4] === 0); return window.mptxTimeline.hover(b[0], (b[2]+b[3])/2); })()`, &tip)
	if !strings.Contains(tip, "chunk ") || !strings.Contains(tip, "attempt ") || !strings.Contains(tip, "MiB") {
		t.Errorf("hovering a bar shows %q, want its chunk, attempt and size", tip)
	}
	p.Eval(`window.mptxTimeline.hover(3, 1e6)`, &gap)
	if !strings.Contains(gap, "start-up gap") {
		t.Errorf("hovering path 3 at +1ms shows %q, want the start-up gap", gap)
	}
	p.Eval(`window.mptxTimeline.hover(4, 1e6)`, &recv)
	if !strings.Contains(recv, "lag after it") {
		t.Errorf("hovering the receiver row shows %q", recv)
	}
	var view []float64
	p.Eval(`(() => { window.mptxTimeline.zoom(8); return window.mptxTimeline.view(); })()`, &view)
	var zoomed int
	p.Eval(`window.mptxTimeline.state.drawnBars`, &zoomed)
	if len(view) != 2 || view[1]-view[0] >= (st.X1-st.X0)/4 || zoomed >= st.DrawnBars {
		t.Errorf("zoom ×8: view %v (was %v..%v), %d bars drawn (was %d)", view, st.X0, st.X1, zoomed, st.DrawnBars)
	}
	var title string
	p.Eval(`(() => { window.mptxTimeline.reset(); window.mptxTimeline.select(1); return document.getElementById("title").textContent; })()`, &title)
	if !strings.Contains(title, "transfer 12") {
		t.Errorf("selecting the second transfer shows %q", title)
	}
	var fetched int
	p.Eval(`performance.getEntriesByType("resource").length`, &fetched)
	if fetched != 0 || p.Count("script[src]") != 0 || p.Count("link") != 0 {
		t.Errorf("the page fetched %d resources (script src %d, link %d): it must be self-contained", fetched, p.Count("script[src]"), p.Count("link"))
	}
	p.Eval(`window.mptxTimeline.select(0)`, nil)
	if errs := p.Errors(); len(errs) > 0 {
		t.Errorf("console errors: %q", errs)
	}
	shot := p.Screenshot("timeline.png")
	t.Logf("screenshot: %s", shot)
	if *screenshot != "" {
		b, err := os.ReadFile(shot)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*screenshot, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
