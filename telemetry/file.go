package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// fileSink writes whole lines to a writer shared by the trace and metric
// file exporters, as the collector's file exporter shares one file between
// pipelines. It is safe for concurrent use.
type fileSink struct {
	mu     sync.Mutex
	w      io.Writer
	c      io.Closer // nil: not ours to close
	name   string
	refs   int
	closed bool
	buf    []byte
}

func newFileSink(w io.Writer, c io.Closer) *fileSink { return &fileSink{w: w, c: c, refs: 1} }

// writeLine writes b and a newline in one Write call.
func (s *fileSink) writeLine(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("telemetry: file exporter: write after shutdown")
	}
	s.buf = append(append(s.buf[:0], b...), '\n')
	if _, err := s.w.Write(s.buf); err != nil {
		return fmt.Errorf("telemetry: file exporter: %w", err)
	}
	return nil
}

// release drops one reference; the last closes the file.
func (s *fileSink) release() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if s.refs--; s.refs > 0 {
		return nil
	}
	s.closed = true
	if s.c != nil {
		if err := s.c.Close(); err != nil {
			return fmt.Errorf("telemetry: file exporter: closing %s: %w", s.name, err)
		}
	}
	return nil
}

// fileTraceClient is an otlptrace.Client that writes each upload as one
// OTLP JSON line. It reuses the OTLP exporter's own span-to-protobuf
// transform and converts the result to JSON with pdata's marshaler, so the
// lines are exactly what the collector's file exporter would write.
type fileTraceClient struct{ sink *fileSink }

func (*fileTraceClient) Start(context.Context) error  { return nil }
func (c *fileTraceClient) Stop(context.Context) error { return c.sink.release() }

func (c *fileTraceClient) UploadTraces(_ context.Context, rs []*tracepb.ResourceSpans) error {
	if len(rs) == 0 {
		return nil
	}
	b, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: rs})
	if err != nil {
		return fmt.Errorf("telemetry: file exporter: encoding spans: %w", err)
	}
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(b)
	if err != nil {
		return fmt.Errorf("telemetry: file exporter: decoding spans: %w", err)
	}
	j, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		return fmt.Errorf("telemetry: file exporter: marshalling spans: %w", err)
	}
	return c.sink.writeLine(j)
}

// fileMetricExporter is a metric exporter writing each collection as one
// OTLP JSON line (an ExportMetricsServiceRequest).
type fileMetricExporter struct{ sink *fileSink }

var _ sdkmetric.Exporter = (*fileMetricExporter)(nil)

func (*fileMetricExporter) Temporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	return sdkmetric.DefaultTemporalitySelector(k)
}

func (*fileMetricExporter) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	return sdkmetric.DefaultAggregationSelector(k)
}

func (e *fileMetricExporter) Export(_ context.Context, rm *metricdata.ResourceMetrics) error {
	md, err := metricsToPdata(rm)
	if err != nil {
		return err
	}
	if md.DataPointCount() == 0 {
		return nil
	}
	j, err := (&pmetric.JSONMarshaler{}).MarshalMetrics(md)
	if err != nil {
		return fmt.Errorf("telemetry: file exporter: marshalling metrics: %w", err)
	}
	return e.sink.writeLine(j)
}

func (*fileMetricExporter) ForceFlush(context.Context) error { return nil }
func (e *fileMetricExporter) Shutdown(context.Context) error { return e.sink.release() }

// metricsToPdata converts the SDK's collected metrics to pdata. It covers
// the aggregations mptx's instruments produce (gauges, sums and explicit
// histograms of int64 or float64); anything else is an error naming it.
func metricsToPdata(rm *metricdata.ResourceMetrics) (pmetric.Metrics, error) {
	md := pmetric.NewMetrics()
	rmOut := md.ResourceMetrics().AppendEmpty()
	putResource(rmOut.Resource(), rm.Resource)
	if rm.Resource != nil {
		rmOut.SetSchemaUrl(rm.Resource.SchemaURL())
	}
	for _, sm := range rm.ScopeMetrics {
		smOut := rmOut.ScopeMetrics().AppendEmpty()
		putScope(smOut.Scope(), sm.Scope)
		smOut.SetSchemaUrl(sm.Scope.SchemaURL)
		for _, m := range sm.Metrics {
			mo := smOut.Metrics().AppendEmpty()
			mo.SetName(m.Name)
			mo.SetDescription(m.Description)
			mo.SetUnit(m.Unit)
			switch d := m.Data.(type) {
			case metricdata.Gauge[int64]:
				gaugePoints(mo.SetEmptyGauge().DataPoints(), d.DataPoints)
			case metricdata.Gauge[float64]:
				gaugePoints(mo.SetEmptyGauge().DataPoints(), d.DataPoints)
			case metricdata.Sum[int64]:
				s := mo.SetEmptySum()
				s.SetIsMonotonic(d.IsMonotonic)
				s.SetAggregationTemporality(temporality(d.Temporality))
				gaugePoints(s.DataPoints(), d.DataPoints)
			case metricdata.Sum[float64]:
				s := mo.SetEmptySum()
				s.SetIsMonotonic(d.IsMonotonic)
				s.SetAggregationTemporality(temporality(d.Temporality))
				gaugePoints(s.DataPoints(), d.DataPoints)
			case metricdata.Histogram[int64]:
				histPoints(mo.SetEmptyHistogram(), d)
			case metricdata.Histogram[float64]:
				histPoints(mo.SetEmptyHistogram(), d)
			default:
				return pmetric.Metrics{}, fmt.Errorf("telemetry: file exporter: metric %s: aggregation %T not supported (want gauge, sum or explicit histogram)", m.Name, m.Data)
			}
		}
	}
	return md, nil
}

func temporality(t metricdata.Temporality) pmetric.AggregationTemporality {
	if t == metricdata.DeltaTemporality {
		return pmetric.AggregationTemporalityDelta
	}
	return pmetric.AggregationTemporalityCumulative
}

func gaugePoints[N int64 | float64](out pmetric.NumberDataPointSlice, in []metricdata.DataPoint[N]) {
	for _, p := range in {
		o := out.AppendEmpty()
		putAttrs(o.Attributes(), p.Attributes.ToSlice())
		o.SetStartTimestamp(pcommon.NewTimestampFromTime(p.StartTime))
		o.SetTimestamp(pcommon.NewTimestampFromTime(p.Time))
		switch v := any(p.Value).(type) {
		case int64:
			o.SetIntValue(v)
		case float64:
			o.SetDoubleValue(v)
		}
	}
}

func histPoints[N int64 | float64](h pmetric.Histogram, d metricdata.Histogram[N]) {
	h.SetAggregationTemporality(temporality(d.Temporality))
	for _, p := range d.DataPoints {
		o := h.DataPoints().AppendEmpty()
		putAttrs(o.Attributes(), p.Attributes.ToSlice())
		o.SetStartTimestamp(pcommon.NewTimestampFromTime(p.StartTime))
		o.SetTimestamp(pcommon.NewTimestampFromTime(p.Time))
		o.SetCount(p.Count)
		o.SetSum(float64(p.Sum))
		o.ExplicitBounds().FromRaw(p.Bounds)
		o.BucketCounts().FromRaw(p.BucketCounts)
		if v, ok := p.Min.Value(); ok {
			o.SetMin(float64(v))
		}
		if v, ok := p.Max.Value(); ok {
			o.SetMax(float64(v))
		}
	}
}

func putResource(out pcommon.Resource, r *resource.Resource) {
	if r != nil {
		putAttrs(out.Attributes(), r.Attributes())
	}
}

func putScope(out pcommon.InstrumentationScope, s instrumentation.Scope) {
	out.SetName(s.Name)
	out.SetVersion(s.Version)
	putAttrs(out.Attributes(), s.Attributes.ToSlice())
}

func putAttrs(m pcommon.Map, kvs []attribute.KeyValue) {
	m.EnsureCapacity(len(kvs))
	for _, kv := range kvs {
		k := string(kv.Key)
		switch kv.Value.Type() {
		case attribute.BOOL:
			m.PutBool(k, kv.Value.AsBool())
		case attribute.INT64:
			m.PutInt(k, kv.Value.AsInt64())
		case attribute.FLOAT64:
			m.PutDouble(k, kv.Value.AsFloat64())
		case attribute.STRING:
			m.PutStr(k, kv.Value.AsString())
		case attribute.BOOLSLICE:
			s := m.PutEmptySlice(k)
			for _, v := range kv.Value.AsBoolSlice() {
				s.AppendEmpty().SetBool(v)
			}
		case attribute.INT64SLICE:
			s := m.PutEmptySlice(k)
			for _, v := range kv.Value.AsInt64Slice() {
				s.AppendEmpty().SetInt(v)
			}
		case attribute.FLOAT64SLICE:
			s := m.PutEmptySlice(k)
			for _, v := range kv.Value.AsFloat64Slice() {
				s.AppendEmpty().SetDouble(v)
			}
		case attribute.STRINGSLICE:
			s := m.PutEmptySlice(k)
			for _, v := range kv.Value.AsStringSlice() {
				s.AppendEmpty().SetStr(v)
			}
		default:
			m.PutStr(k, kv.Value.Emit())
		}
	}
}

// NewFileSpanExporter returns a span exporter writing each batch as one
// OTLP JSON line (an ExportTraceServiceRequest, the collector's file
// exporter format) to w. Shutdown closes w if it is an io.Closer.
func NewFileSpanExporter(ctx context.Context, w io.Writer) (sdktrace.SpanExporter, error) {
	c, _ := w.(io.Closer)
	return otlptrace.New(ctx, &fileTraceClient{sink: newFileSink(w, c)})
}

// NewFileMetricExporter returns a metric exporter writing each collection
// as one OTLP JSON line (an ExportMetricsServiceRequest) to w. Shutdown
// closes w if it is an io.Closer.
func NewFileMetricExporter(w io.Writer) sdkmetric.Exporter {
	c, _ := w.(io.Closer)
	return &fileMetricExporter{sink: newFileSink(w, c)}
}
