package analyze

import (
	"cmp"
	"math"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/mptx-dev/mptx/telemetry/schema"
)

// MetricsSummary is what the metric lines of the input say (mptx's file
// exporter writes them into the same file as the spans): per path the
// counters' totals and the histograms' percentiles, and the telemetry's
// own losses. Cumulative points are read as the collector would: the
// latest point of each series, summed over the series' start times (a
// restarted process starts a new series).
type MetricsSummary struct {
	Lines  int64          `json:"lines"`
	Series int            `json:"series"`
	Paths  []*PathMetrics `json:"paths"`
	// TransferDuration is from mptx.transfer.duration (completed
	// transfers); RecvLag from mptx.recv.lag.
	TransferDuration Quantiles `json:"transfer_duration"`
	RecvLag          Quantiles `json:"recv_lag"`
	// Dropped is mptx.telemetry.dropped by reason: events lost because a
	// recorder's ring was full (ring_full) or transfers not traced
	// because its table was full (table_full). Not zero means the spans
	// are incomplete.
	Dropped map[string]int64 `json:"dropped,omitempty"`
}

// PathMetrics is one path of one service according to its metrics.
type PathMetrics struct {
	Service      string        `json:"service,omitempty"`
	Path         int           `json:"path"`
	Device       string        `json:"device,omitempty"`
	BytesSent    int64         `json:"bytes_sent"`
	BytesAcked   int64         `json:"bytes_acked"`
	Requeues     int64         `json:"requeues"`
	Down         int64         `json:"down"`
	CNPs         int64         `json:"cnps"`
	ECNChunks    int64         `json:"ecn_marked_chunks"`
	PFCPauses    int64         `json:"pfc_pauses"`
	PFCPauseTime time.Duration `json:"pfc_pause_ns"`
	ChunkLatency Quantiles     `json:"chunk_latency"`
	RTT          Quantiles     `json:"rtt"`
	// Receiver metrics of the path (ReceiveRecorder).
	RecvChunks     int64     `json:"recv_chunks"`
	RecvBytes      int64     `json:"recv_bytes"`
	RecvDuplicates int64     `json:"recv_duplicates"`
	RecvQueue      Quantiles `json:"recv_queue"`
	RecvHandoff    Quantiles `json:"recv_handoff"`
}

// seriesKey identifies one metric series (and one of its start times).
type seriesKey struct {
	service, name, device, reason string
	path                          int64
	start                         pcommon.Timestamp
}

type point struct {
	at     pcommon.Timestamp
	value  float64
	hist   bool
	count  uint64
	bounds []float64
	counts []uint64
	min    float64
	max    float64
}

// metricsReader accumulates metric lines.
type metricsReader struct {
	lines  int64
	series map[seriesKey]point
}

func newMetricsReader() *metricsReader { return &metricsReader{series: map[seriesKey]point{}} }

// add reads one decoded metrics document.
func (m *metricsReader) add(md pmetric.Metrics) {
	m.lines++
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		service := ""
		if v, ok := rm.Resource().Attributes().Get(schema.AttrServiceName); ok {
			service = v.AsString()
		}
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m.metric(service, ms.At(k))
			}
		}
	}
}

func (m *metricsReader) metric(service string, mt pmetric.Metric) {
	name := mt.Name()
	keyOf := func(attrs pcommon.Map, start pcommon.Timestamp) seriesKey {
		k := seriesKey{service: service, name: name, path: -1, start: start}
		if v, ok := attrs.Get(schema.AttrPath); ok {
			k.path, _ = intValue(v)
		}
		if v, ok := attrs.Get(schema.AttrDevice); ok {
			k.device = v.AsString()
		}
		if v, ok := attrs.Get(schema.AttrReason); ok {
			k.reason = v.AsString()
		}
		return k
	}
	keep := func(k seriesKey, p point) {
		if old, ok := m.series[k]; !ok || p.at >= old.at {
			m.series[k] = p
		}
	}
	number := func(dps pmetric.NumberDataPointSlice) {
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			v := dp.DoubleValue()
			if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
				v = float64(dp.IntValue())
			}
			keep(keyOf(dp.Attributes(), dp.StartTimestamp()), point{at: dp.Timestamp(), value: v})
		}
	}
	switch mt.Type() {
	case pmetric.MetricTypeSum:
		number(mt.Sum().DataPoints())
	case pmetric.MetricTypeGauge:
		number(mt.Gauge().DataPoints())
	case pmetric.MetricTypeHistogram:
		dps := mt.Histogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			p := point{at: dp.Timestamp(), hist: true, count: dp.Count(), bounds: dp.ExplicitBounds().AsRaw(), counts: dp.BucketCounts().AsRaw(),
				min: math.NaN(), max: math.NaN()}
			if dp.HasMin() {
				p.min = dp.Min()
			}
			if dp.HasMax() {
				p.max = dp.Max()
			}
			keep(keyOf(dp.Attributes(), dp.StartTimestamp()), p)
		}
	}
}

// summary combines the series.
func (m *metricsReader) summary() *MetricsSummary {
	if m.lines == 0 {
		return nil
	}
	out := &MetricsSummary{Lines: m.lines, Series: len(m.series)}
	type pk struct {
		service string
		path    int64
	}
	paths := map[pk]*PathMetrics{}
	type hk struct {
		service, name string
		path          int64
	}
	hists := map[hk]*mergedHist{} // (service, path, metric) → merged buckets
	histOf := func(k seriesKey) *mergedHist {
		hk := hk{k.service, k.name, k.path}
		h := hists[hk]
		if h == nil {
			h = &mergedHist{}
			hists[hk] = h
		}
		return h
	}
	var transferDur, recvLag mergedHist
	for k, p := range m.series {
		if k.name == schema.MetricDropped {
			if out.Dropped == nil {
				out.Dropped = map[string]int64{}
			}
			out.Dropped[cmp.Or(k.reason, "unknown")] += int64(p.value)
			continue
		}
		if p.hist {
			switch k.name {
			case schema.MetricTransferTime:
				transferDur.add(p)
				continue
			case schema.MetricRecvLag:
				recvLag.add(p)
				continue
			}
		}
		if k.path < 0 {
			continue
		}
		pm := paths[pk{k.service, k.path}]
		if pm == nil {
			pm = &PathMetrics{Service: k.service, Path: int(k.path)}
			paths[pk{k.service, k.path}] = pm
		}
		if pm.Device == "" {
			pm.Device = k.device
		}
		v := int64(p.value)
		switch k.name {
		case schema.MetricBytesSent:
			pm.BytesSent += v
		case schema.MetricBytesAcked:
			pm.BytesAcked += v
		case schema.MetricRequeues:
			pm.Requeues += v
		case schema.MetricPathDown:
			pm.Down += v
		case schema.MetricCNP:
			pm.CNPs += v
		case schema.MetricECN:
			pm.ECNChunks += v
		case schema.MetricPFCPauses:
			pm.PFCPauses += v
		case schema.MetricPFCPauseTime:
			pm.PFCPauseTime += time.Duration(p.value * 1e9)
		case schema.MetricRecvChunks:
			pm.RecvChunks += v
		case schema.MetricRecvBytes:
			pm.RecvBytes += v
		case schema.MetricRecvDuplicates:
			pm.RecvDuplicates += v
		case schema.MetricChunkLatency, schema.MetricRTT, schema.MetricRecvQueue, schema.MetricRecvHandoff:
			if p.hist {
				h := histOf(k)
				h.add(p)
				h.pm, h.name = pm, k.name
			}
		}
	}
	for _, h := range hists {
		if h.pm == nil {
			continue
		}
		q := h.quantiles()
		switch h.name {
		case schema.MetricChunkLatency:
			h.pm.ChunkLatency = q
		case schema.MetricRTT:
			h.pm.RTT = q
		case schema.MetricRecvQueue:
			h.pm.RecvQueue = q
		case schema.MetricRecvHandoff:
			h.pm.RecvHandoff = q
		}
	}
	out.TransferDuration, out.RecvLag = transferDur.quantiles(), recvLag.quantiles()
	for _, pm := range paths {
		out.Paths = append(out.Paths, pm)
	}
	slices.SortFunc(out.Paths, func(x, y *PathMetrics) int {
		return cmp.Or(cmp.Compare(x.Service, y.Service), cmp.Compare(x.Path, y.Path))
	})
	return out
}

// mergedHist sums explicit-bucket histogram points that share bounds
// (points with other bounds are left out: mptx's histograms all share
// one set).
type mergedHist struct {
	count    uint64
	bounds   []float64
	counts   []uint64
	min, max float64
	pm       *PathMetrics
	name     string
}

func (h *mergedHist) add(p point) {
	if len(p.counts) != len(p.bounds)+1 {
		return
	}
	if h.counts == nil {
		h.bounds = p.bounds
		h.counts = make([]uint64, len(p.counts))
		h.min, h.max = math.NaN(), math.NaN()
	} else if !slices.Equal(h.bounds, p.bounds) {
		return
	}
	for i, c := range p.counts {
		h.counts[i] += c
	}
	h.count += p.count
	if !math.IsNaN(p.min) && (math.IsNaN(h.min) || p.min < h.min) {
		h.min = p.min
	}
	if !math.IsNaN(p.max) && (math.IsNaN(h.max) || p.max > h.max) {
		h.max = p.max
	}
}

// quantiles reads p50, p90, p99 and the max (seconds → durations),
// interpolating linearly within the bucket holding the rank (as
// Prometheus's histogram_quantile does), the outer buckets bounded by the
// recorded min and max.
func (h *mergedHist) quantiles() Quantiles {
	var total uint64
	for _, c := range h.counts {
		total += c
	}
	if total == 0 {
		return Quantiles{}
	}
	q := func(p float64) time.Duration {
		rank := math.Max(1, math.Ceil(p/100*float64(total)))
		var seen float64
		for i, c := range h.counts {
			if c == 0 {
				continue
			}
			if seen+float64(c) >= rank {
				lo, hi := 0.0, h.max
				if i > 0 {
					lo = h.bounds[i-1]
				} else if !math.IsNaN(h.min) {
					lo = h.min
				}
				if i < len(h.bounds) {
					hi = h.bounds[i]
				}
				if math.IsNaN(hi) {
					hi = lo
				}
				if !math.IsNaN(h.max) {
					hi = math.Min(hi, h.max)
				}
				if !math.IsNaN(h.min) {
					lo = math.Max(lo, math.Min(h.min, hi))
				}
				v := lo + (hi-lo)*(rank-seen)/float64(c)
				return time.Duration(v * 1e9)
			}
			seen += float64(c)
		}
		return time.Duration(h.max * 1e9)
	}
	out := Quantiles{N: int64(total), P50: q(50), P90: q(90), P99: q(99)}
	if !math.IsNaN(h.max) {
		out.Max = time.Duration(h.max * 1e9)
	} else {
		out.Max = out.P99
	}
	return out
}
