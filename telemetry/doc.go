// Package telemetry turns the multipath engine's recorder events into
// OpenTelemetry traces and metrics, and sets up their exporters from the
// standard OTEL_* environment variables. The engine never imports
// OpenTelemetry: it calls multipath.Recorder.Record, which Recorder
// implements.
//
// # Model
//
// Each transfer is one trace. On the sender it is an mptx.transfer span
// (the root, or the child of the application's span when the session
// starts it with Recorder.BeginTransfer); each attempt of each chunk is an
// mptx.chunk span, its child; path events (down, up, quarantine, CNP
// bursts and, in the simulator, PFC pauses) are span events on the live
// transfer spans. On the receiver (ReceiveRecorder) it is an mptx.receive
// span, the child of the sender's transfer span through the W3C trace
// context the session carries on its control channel
// (AppendTraceContext, ParseTraceContext), with an mptx.recv.chunk span
// per arrived chunk (arrival, poll, the application's hand-off).
// ReceiverTap drives a ReceiveRecorder around a receiver driver that does
// not call it. Per-path metrics cover
// window, rate, bytes in flight, smoothed RTT and chunk latency
// (histograms), ECN/CNP counts, bytes sent and acknowledged. Names are in
// package telemetry/schema and listed with units in docs/telemetry.md.
// There are no per-packet spans.
//
// # Time
//
// Events carry vtime.Time (nanoseconds on the driver's epoch). Spans and
// span events are stamped with explicit timestamps (trace.WithTimestamp)
// converted by Config.Wall: (*vtime.Monotonic).Wall on hardware,
// FixedEpoch(runStart) in the simulator, so the simulator's spans carry
// virtual time and one analyser (package telemetry/analyze) reads both.
// Telemetry.UseVirtualClock does the same for metric points.
//
// # Ownership, concurrency and cost
//
// A Recorder belongs to one engine: Record, RecordPFCPause, Flush and
// Close are called from the engine's goroutine. Record copies the event
// into a ring and returns (no allocation, no blocking); a goroutine owned
// by the Recorder builds spans and metric points, and Close stops it.
// Config.Synchronous does the work inside Record instead, for
// deterministic single-goroutine runs. Telemetry (from Setup) is safe for
// concurrent use; call Shutdown after Recorder.Close to flush.
//
// Chunk spans, one per chunk attempt, are most of the work. When the
// provider's span processors are wrapped in NewSpanProcessor, as Setup
// wraps its exporters, the Recorder builds them itself as immutable
// ReadOnlySpans (one allocation each instead of the SDK's thirteen) and
// hands them to those processors; the exported spans are the same.
//
// # Export
//
// Setup reads OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER (otlp, file,
// console, none; default file; SetupConfig.TracesExporter,
// MetricsExporter and TraceFile override them, as the commands' --trace
// does), OTEL_EXPORTER_OTLP_* (gRPC or
// http/protobuf), OTEL_TRACES_SAMPLER(_ARG), OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES. The file exporter writes OTLP JSON lines in
// the OpenTelemetry collector's file-exporter format (one
// ExportTraceServiceRequest or ExportMetricsServiceRequest per line);
// OTEL_SDK_DISABLED=true gives no-op providers.
package telemetry
