package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mptx-dev/mptx/telemetry/schema"
)

// instruments are the Recorder's metric instruments. Gauges and counters are
// observable: Record stores or adds to per-path atomics and the SDK reads
// them at collection, so an event costs an atomic operation. Histograms are
// synchronous and recorded with a precomputed attribute set.
type instruments struct {
	srtt, rtt, latency, transferTime metric.Float64Histogram
}

// Histogram bucket boundaries in seconds: 1µs to 10s, roughly three per
// decade, covering fabric RTTs (µs) up to multi-second chunk latencies.
var secondsBuckets = []float64{
	1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4,
	1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1, 0.2, 0.5, 1, 2, 5, 10,
}

func (ins *instruments) init(mp metric.MeterProvider, r *Recorder) error {
	m := mp.Meter(schema.ScopeName, metric.WithInstrumentationVersion(schema.SchemaVersion))
	var err error
	hist := func(name, desc string) metric.Float64Histogram {
		if err != nil {
			return nil
		}
		var h metric.Float64Histogram
		h, err = m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(secondsBuckets...))
		return h
	}
	ins.srtt = hist(schema.MetricSRTT, "Smoothed RTT of the path, sampled at every chunk completion")
	ins.rtt = hist(schema.MetricRTT, "RTT samples of the path: each chunk's last segment and each probe")
	ins.latency = hist(schema.MetricChunkLatency, "Chunk attempt latency, from the attempt's start to its acknowledgement")
	ins.transferTime = hist(schema.MetricTransferTime, "Completion time of successful transfers")
	if err != nil {
		return fmt.Errorf("telemetry: creating histograms: %w", err)
	}
	dropped, err := m.Int64ObservableCounter(schema.MetricDropped, metric.WithUnit("{item}"),
		metric.WithDescription("Telemetry lost under load: events dropped because the recorder's ring was full (mptx.reason=ring_full), transfers not traced because its table was full (mptx.reason=table_full)"))
	if err != nil {
		return fmt.Errorf("telemetry: creating %s: %w", schema.MetricDropped, err)
	}
	ringFull := metric.WithAttributes(attribute.String(schema.AttrReason, "ring_full"))
	tableFull := metric.WithAttributes(attribute.String(schema.AttrReason, "table_full"))

	type gauge struct {
		name, unit, desc string
		counter          bool
		value            func(*pathState) int64
	}
	defs := []gauge{
		{schema.MetricWindow, "By", "Congestion window of the path", false, func(p *pathState) int64 { return p.window.Load() }},
		{schema.MetricRate, "bit/s", "Pacing rate of the path", false, func(p *pathState) int64 { return p.rate.Load() }},
		{schema.MetricInFlight, "By", "Bytes in flight on the path", false, func(p *pathState) int64 { return p.inflight.Load() }},
		{schema.MetricECN, "{chunk}", "Acknowledged chunk attempts that saw at least one ECN mark", true, func(p *pathState) int64 { return p.ecnChunks.Load() }},
		{schema.MetricCNP, "{cnp}", "Congestion notification packets received for the path", true, func(p *pathState) int64 { return p.cnp.Load() }},
		{schema.MetricBytesSent, "By", "Bytes of chunk attempts started on the path (requeued attempts included)", true, func(p *pathState) int64 { return p.sent.Load() }},
		{schema.MetricBytesAcked, "By", "Bytes of chunks acknowledged on the path", true, func(p *pathState) int64 { return p.acked.Load() }},
		{schema.MetricRequeues, "{chunk}", "Chunk attempts requeued away from the path", true, func(p *pathState) int64 { return p.requeues.Load() }},
		{schema.MetricPathDown, "{event}", "Times the path went down", true, func(p *pathState) int64 { return p.down.Load() }},
		{schema.MetricPFCPauses, "{pause}", "PFC pause episodes on the path (simulator)", true, func(p *pathState) int64 { return p.pfcPauses.Load() }},
	}
	obs := make([]metric.Int64Observable, len(defs))
	for i, d := range defs {
		if d.counter {
			obs[i], err = m.Int64ObservableCounter(d.name, metric.WithUnit(d.unit), metric.WithDescription(d.desc))
		} else {
			obs[i], err = m.Int64ObservableGauge(d.name, metric.WithUnit(d.unit), metric.WithDescription(d.desc))
		}
		if err != nil {
			return fmt.Errorf("telemetry: creating %s: %w", d.name, err)
		}
	}
	pauseTime, err := m.Float64ObservableCounter(schema.MetricPFCPauseTime, metric.WithUnit("s"),
		metric.WithDescription("Time the path's traffic was paused by PFC (simulator)"))
	if err != nil {
		return fmt.Errorf("telemetry: creating %s: %w", schema.MetricPFCPauseTime, err)
	}
	all := make([]metric.Observable, 0, len(obs)+1)
	for _, o := range obs {
		all = append(all, o)
	}
	all = append(all, pauseTime, dropped)
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for pi := range r.paths {
			p := &r.paths[pi]
			opt := metric.WithAttributeSet(p.set)
			for i, d := range defs {
				o.ObserveInt64(obs[i], d.value(p), opt)
			}
			o.ObserveFloat64(pauseTime, float64(p.pfcNs.Load())/1e9, opt)
		}
		o.ObserveInt64(dropped, r.DroppedEvents(), ringFull)
		o.ObserveInt64(dropped, r.dropped.Load(), tableFull)
		return nil
	}, all...)
	if err != nil {
		return fmt.Errorf("telemetry: registering metric callback: %w", err)
	}
	return nil
}
