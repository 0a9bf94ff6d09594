package analyze

import (
	"bytes"
	"cmp"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/mptx-dev/mptx/telemetry/schema"
)

// timelineJS and timelineCSS are the page's script and style, inlined:
// the page loads nothing from the network.
//
//go:embed timeline.js
var timelineJS string

//go:embed timeline.css
var timelineCSS string

// Bar kinds of the HTML timeline (htmlTransfer.Bars[i][4]); critical adds
// barCritical.
const (
	barAcked = iota
	barStraggler
	barRequeued
	barOther    // abandoned, superseded
	barCritical = 16
)

// Event kinds of the HTML timeline (htmlTransfer.Events[i][2]).
const (
	evDown = iota
	evUp
	evQuarantine
	evRequeue
	evCNP
	evPFC
)

// htmlTransfer is one transfer as the page's script reads it. Times are
// nanoseconds since the transfer's start. Bars and events are arrays of
// integers to keep the page small: a bar is [row, lane, start, end, kind,
// chunk, attempt, bytes, reason index (-1: none)], an event [row, at,
// kind, chunk or count, duration].
type htmlTransfer struct {
	ID       int64           `json:"id"`
	Trace    string          `json:"trace"`
	Title    string          `json:"title"`
	Lines    []string        `json:"lines"`
	End      int64           `json:"end"`
	Gap      int64           `json:"gap"` // first chunk's start
	Rows     []htmlRow       `json:"rows"`
	Bars     [][9]int64      `json:"bars"`
	Events   [][5]int64      `json:"events"`
	Reasons  []string        `json:"reasons"`
	Receiver *htmlReceiver   `json:"receiver,omitempty"`
	Legend   map[string]bool `json:"legend"`
}

type htmlRow struct {
	Path  int    `json:"path"`
	Label string `json:"label"`
	Lanes int    `json:"lanes"`
	First int64  `json:"first"` // first attempt's start, -1 if none
	Gap   bool   `json:"gap"`   // a start-up gap worth showing
}

type htmlReceiver struct {
	Label       string `json:"label"`
	LastArrival int64  `json:"last_arrival"`
	Lag         int64  `json:"lag"`
	Bound       string `json:"bound,omitempty"`
}

// startupGapShown is when a path's start-up gap (transfer start to its
// first chunk) is marked: at least this share of the transfer, and 1 µs.
const startupGapShown = 0.02

// TimelineHTML writes one self-contained HTML page (inline script and
// style, nothing loaded from the network) with an interactive timeline of
// each transfer: a row per path with its chunk attempts as bars (lanes for
// overlapping ones), coloured by outcome, the critical chunk outlined;
// path down/up and quarantine markers, requeue marks, CNP bursts and PFC
// pauses; each path's start-up gap (transfer start to its first chunk)
// hatched and labelled; and, when the receiver's spans are there, a
// receiver row (last arrival, then its lag). The mouse wheel zooms around
// the pointer, dragging pans, a double click resets; hovering a bar shows
// its chunk (index, attempt, path, bytes, times, latency, outcome,
// reason). Several transfers get a selector. At most MaxHTMLTransfers
// transfers, MaxHTMLRows paths and MaxHTMLBars attempts per transfer.
func TimelineHTML(w io.Writer, ts []*Transfer) error {
	if len(ts) == 0 {
		return fmt.Errorf("analyze: no transfer to draw")
	}
	if len(ts) > MaxHTMLTransfers {
		return fmt.Errorf("analyze: %d transfers: one HTML timeline holds at most %d (select with --transfer or filters)", len(ts), MaxHTMLTransfers)
	}
	data := make([]htmlTransfer, 0, len(ts))
	for _, t := range ts {
		h, err := htmlOf(t)
		if err != nil {
			return err
		}
		data = append(data, h)
	}
	js, err := json.Marshal(data) // escapes <, > and &: safe inside <script>
	if err != nil {
		return fmt.Errorf("analyze: timeline data: %w", err)
	}
	var b bytes.Buffer
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	b.WriteString("<title>mptx transfer timeline</title>\n<style>\n")
	b.WriteString(timelineCSS)
	b.WriteString("</style></head><body>\n")
	b.WriteString(`<header><h1 id="title"></h1><div id="lines"></div>
<div id="controls"><label id="pick-label" hidden>transfer <select id="pick"></select></label>
<button id="zoom-in" title="zoom in (+)">+</button><button id="zoom-out" title="zoom out (−)">−</button><button id="zoom-reset" title="whole transfer (0)">reset</button>
<span class="hint">wheel: zoom · drag: pan · double-click: reset · hover a bar for its chunk</span></div>
<div id="legend"></div></header>
<main><canvas id="tl"></canvas><div id="tip" hidden></div></main>
`)
	b.WriteString(`<script id="mptx-data" type="application/json">`)
	b.Write(js)
	b.WriteString("</script>\n<script>\n")
	b.WriteString(timelineJS)
	b.WriteString("</script>\n</body></html>\n")
	_, err = w.Write(b.Bytes())
	if err != nil {
		return fmt.Errorf("analyze: timeline: %w", err)
	}
	return nil
}

// htmlOf lays t out for the page.
func htmlOf(t *Transfer) (htmlTransfer, error) {
	if len(t.Attempts) == 0 && t.Receiver == nil {
		return htmlTransfer{}, fmt.Errorf("analyze: transfer %d has no chunk spans to draw", t.ID)
	}
	if len(t.Attempts) > MaxHTMLBars {
		return htmlTransfer{}, fmt.Errorf("analyze: transfer %d has %d chunk attempts: the HTML timeline draws at most %d", t.ID, len(t.Attempts), MaxHTMLBars)
	}
	h := htmlTransfer{ID: t.ID, Trace: t.TraceID, End: int64(t.Completion), Gap: -1, Legend: map[string]bool{},
		Rows: []htmlRow{}, Bars: [][9]int64{}, Events: [][5]int64{}, Reasons: []string{}, Lines: []string{}}
	h.Title = fmt.Sprintf("transfer %d", t.ID)
	if t.Name != "" {
		h.Title += " " + t.Name
	}
	h.Title += fmt.Sprintf(": %s in %v (%s)", FormatBytes(t.Bytes), round(t.Completion), t.Outcome)
	line := fmt.Sprintf("trace %s · %d chunks of %s over %d paths", t.TraceID, t.Chunks, FormatBytes(t.ChunkSize), t.Paths)
	if t.Service != "" {
		line += " · " + t.Service
	}
	if t.Peer != "" {
		line += " → " + t.Peer
	}
	if t.Goodput > 0 {
		line += " · " + FormatRate(t.Goodput)
	}
	h.Lines = append(h.Lines, line)
	if t.Error != "" {
		h.Lines = append(h.Lines, "error: "+t.Error)
	}
	if c := t.Critical; c != nil {
		why := ""
		if len(c.Why) > 0 {
			why = " — " + c.Why[0]
		}
		h.Lines = append(h.Lines, fmt.Sprintf("critical: chunk %d on path %d, acked +%v%s", c.Chunk, c.Path, round(c.Finish), why))
	}
	if t.ReceiverBound != "" {
		h.Lines = append(h.Lines, "receiver-bound: "+t.ReceiverBound)
	}

	paths := map[int]struct{}{}
	for _, a := range t.Attempts {
		paths[a.Path] = struct{}{}
	}
	for _, e := range t.Events {
		paths[e.Path] = struct{}{}
	}
	if len(paths) > MaxHTMLRows {
		return htmlTransfer{}, fmt.Errorf("analyze: transfer %d spans %d paths: the HTML timeline draws at most %d", t.ID, len(paths), MaxHTMLRows)
	}
	order := make([]int, 0, len(paths))
	for p := range paths {
		order = append(order, p)
	}
	slices.Sort(order)
	rowOf := make(map[int]int, len(order))
	for i, p := range order {
		rowOf[p] = i
		label := fmt.Sprintf("path %d", p)
		for _, ps := range t.PerPath {
			if ps.Path == p && ps.Device != "" {
				label += " " + ps.Device
			}
		}
		h.Rows = append(h.Rows, htmlRow{Path: p, Label: label, First: -1})
	}
	straggler := map[[3]int64]bool{}
	for _, s := range t.Stragglers {
		straggler[[3]int64{s.Chunk, int64(s.Path), int64(s.Attempt)}] = true
	}
	reasons := map[string]int64{}
	reasonIdx := func(r string) int64 {
		if r == "" {
			return -1
		}
		i, ok := reasons[r]
		if !ok {
			i = int64(len(h.Reasons))
			reasons[r] = i
			h.Reasons = append(h.Reasons, r)
		}
		return i
	}
	atts := slices.Clone(t.Attempts)
	slices.SortStableFunc(atts, func(x, y Attempt) int { return cmp.Compare(x.Start, y.Start) })
	laneEnds := make([][]time.Duration, len(h.Rows))
	for _, a := range atts {
		r := rowOf[a.Path]
		lane := -1
		for l, end := range laneEnds[r] {
			if end <= a.Start {
				lane = l
				break
			}
		}
		if lane < 0 && len(laneEnds[r]) < maxLanes {
			lane = len(laneEnds[r])
			laneEnds[r] = append(laneEnds[r], 0)
		}
		if lane < 0 {
			lane = maxLanes - 1
		}
		laneEnds[r][lane] = max(laneEnds[r][lane], a.End)
		kind := int64(barOther)
		switch {
		case a.Outcome == schema.OutcomeAcked && straggler[[3]int64{a.Chunk, int64(a.Path), int64(a.Try)}]:
			kind = barStraggler
		case a.Outcome == schema.OutcomeAcked:
			kind = barAcked
		case a.Outcome == schema.OutcomeRequeued:
			kind = barRequeued
		}
		h.Legend[[]string{"acked", "straggler", "requeued", "other"}[kind]] = true
		if c := t.Critical; c != nil && a.Chunk == c.Chunk && a.Path == c.Path && a.Outcome == schema.OutcomeAcked && a.End == c.Finish {
			kind |= barCritical
			h.Legend["critical"] = true
		}
		reason := a.Reason
		if reason == "" && kind&^barCritical == barOther {
			reason = a.Outcome
		}
		h.Bars = append(h.Bars, [9]int64{int64(r), int64(lane), int64(a.Start), int64(a.End), kind, a.Chunk, int64(a.Try), int64(a.Bytes), reasonIdx(reason)})
		row := &h.Rows[r]
		if row.First < 0 || int64(a.Start) < row.First {
			row.First = int64(a.Start)
		}
		if h.Gap < 0 || int64(a.Start) < h.Gap {
			h.Gap = int64(a.Start)
		}
	}
	for r := range h.Rows {
		h.Rows[r].Lanes = max(1, len(laneEnds[r]))
		f := h.Rows[r].First
		h.Rows[r].Gap = f > int64(time.Microsecond) && float64(f) >= startupGapShown*float64(max(t.Completion, 1))
		if h.Rows[r].Gap {
			h.Legend["gap"] = true
		}
	}
	for _, e := range t.Events {
		kind := int64(-1)
		switch e.Name {
		case schema.EventPathDown:
			kind = evDown
		case schema.EventPathUp:
			kind = evUp
		case schema.EventPathQuarantine:
			kind = evQuarantine
		case schema.EventRequeue:
			kind = evRequeue
		case schema.EventCNPBurst:
			kind = evCNP
		case schema.EventPFCPause:
			kind = evPFC
		}
		if kind < 0 {
			continue
		}
		h.Legend[[]string{"down", "up", "quarantine", "requeue", "cnp", "pfc"}[kind]] = true
		h.Events = append(h.Events, [5]int64{int64(rowOf[e.Path]), int64(e.At), kind, e.Chunk, int64(e.Dur)})
	}
	if rv := t.Receiver; rv != nil {
		label := "receiver"
		if rv.Service != "" {
			label += " " + rv.Service
		}
		h.Receiver = &htmlReceiver{Label: label, LastArrival: int64(rv.LastArrival), Lag: int64(rv.Lag), Bound: t.ReceiverBound}
		h.Lines = append(h.Lines, fmt.Sprintf("receiver (its clock): last chunk arrived +%v, done %v later; hand-off p99 %v per chunk, %v in all; completion-queue wait max %v",
			round(rv.LastArrival), round(rv.Lag), round(rv.HandoffP99), round(rv.HandoffTotal), round(rv.QueueMax)))
	}
	if h.Gap > 0 && float64(h.Gap) >= startupGapShown*float64(max(t.Completion, 1)) {
		h.Lines = append(h.Lines, fmt.Sprintf("start-up gap: the first chunk started %v after the transfer", round(time.Duration(h.Gap))))
	}
	return h, nil
}
