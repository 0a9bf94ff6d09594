package telemetry

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/telemetry/schema"
	"github.com/mptx-dev/mptx/vtime"
)

// pathEvent adds a path event to every live traced transfer.
func (r *Recorder) pathEvent(name string, now vtime.Time, path int, reason string, backoff time.Duration) {
	if !r.tracing || len(r.live) == 0 {
		return
	}
	a := append(r.attrs[:0], attribute.Int(schema.AttrPath, path))
	if reason != "" {
		a = append(a, attribute.String(schema.AttrReason, reason))
	}
	if backoff != 0 {
		a = append(a, attribute.Int64(schema.AttrBackoff, int64(backoff)))
	}
	r.attrs = a
	r.addEvent(name, now, a)
}

func (r *Recorder) addEvent(name string, at vtime.Time, a []attribute.KeyValue) {
	ts := trace.WithTimestamp(r.wall(at))
	attrs := trace.WithAttributes(a...)
	for _, i := range r.live {
		if s := &r.slots[i]; s.recording {
			s.span.AddEvent(name, ts, attrs)
		}
	}
}

func (r *Recorder) cnp(ev *multipath.Event) {
	p := r.path(ev.Path)
	if p == nil {
		return
	}
	p.cnp.Add(int64(ev.ECN))
	if !r.tracing || ev.ECN == 0 {
		return
	}
	if p.burstCount > 0 && ev.Now.Sub(p.burstLast) > r.gap {
		r.flushBurst(ev.Path)
	}
	if p.burstCount == 0 {
		p.burstStart = ev.Now
	}
	p.burstLast = ev.Now
	p.burstCount += ev.ECN
}

// flushBurst reports path's open CNP burst, if any, on the live transfers.
func (r *Recorder) flushBurst(path int) {
	p := &r.paths[path]
	if p.burstCount == 0 {
		return
	}
	if len(r.live) > 0 {
		a := append(r.attrs[:0],
			attribute.Int(schema.AttrPath, path),
			attribute.Int64(schema.AttrCNPCount, int64(min(p.burstCount, 1<<62))),
			attribute.Int64(schema.AttrBurstNs, int64(p.burstLast.Sub(p.burstStart))),
		)
		r.attrs = a
		r.addEvent(schema.EventCNPBurst, p.burstStart, a)
	}
	p.burstCount = 0
}

// RecordPFCPause implements PFCRecorder. Like Record it only queues the
// event.
func (r *Recorder) RecordPFCPause(path int, now vtime.Time, d time.Duration) {
	ev := multipath.Event{Kind: kindPFC, Now: now, Path: path, Latency: d}
	r.Record(&ev)
}

func (r *Recorder) pfcPause(path int, now vtime.Time, d time.Duration) {
	if now > vtime.Time(r.lastNow.Load()) {
		r.lastNow.Store(int64(now))
	}
	if p := r.path(path); p != nil {
		p.pfcPauses.Add(1)
		p.pfcNs.Add(int64(d))
	}
	if !r.tracing || len(r.live) == 0 {
		return
	}
	a := append(r.attrs[:0],
		attribute.Int(schema.AttrPath, path),
		attribute.Int64(schema.AttrPauseNs, int64(d)),
	)
	r.attrs = a
	r.addEvent(schema.EventPFCPause, now, a)
}
