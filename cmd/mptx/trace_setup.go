package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mptx-dev/mptx/telemetry"
)

// traceFlag is the --trace FILE flag of the commands that move data
// (demo, sim, exp run; send and recv through the session), and their
// reading of the standard OTEL_* variables.
type traceFlag struct{ file string }

func (t *traceFlag) register(c *cobra.Command) {
	c.Flags().StringVar(&t.file, "trace", "", "write traces and metrics to this file as OTLP JSON lines (the OTel collector's file format; read it with mptx trace analyze). Without it, setting OTEL_TRACES_EXPORTER or OTEL_METRICS_EXPORTER (otlp, file, console) turns telemetry on")
}

// config returns the telemetry setup the command should make, and false
// when telemetry is off. --trace FILE sends traces and metrics to FILE
// (overriding the OTEL_*_EXPORTER variables and MPTX_OTEL_FILE). Without
// it telemetry is on when OTEL_TRACES_EXPORTER or OTEL_METRICS_EXPORTER is
// set (and OTEL_SDK_DISABLED is not true); setting one of them sends both
// signals there (set both to split them). Everything else (endpoints,
// protocol, sampler, service name, resource) comes from the OTEL_*
// variables, as telemetry.Setup reads them; service is the default
// service.name.
func (t *traceFlag) config(service string, virtual bool) (telemetry.SetupConfig, bool) {
	cfg := telemetry.SetupConfig{ServiceName: service, VirtualTime: virtual}
	if t.file != "" {
		cfg.TraceFile = t.file
		return cfg, true
	}
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return cfg, false
	}
	tr := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))
	me := strings.TrimSpace(os.Getenv("OTEL_METRICS_EXPORTER"))
	if tr == "" && me == "" {
		return cfg, false
	}
	cfg.TracesExporter, cfg.MetricsExporter = cmp.Or(tr, me), cmp.Or(me, tr)
	return cfg, true
}

// start sets telemetry up when asked (nil when off). Bad OTEL_* values
// are bad input.
func (t *traceFlag) start(ctx context.Context, service string, virtual bool) (*telemetry.Telemetry, error) {
	cfg, on := t.config(service, virtual)
	if !on {
		return nil, nil
	}
	tel, err := telemetry.Setup(ctx, cfg)
	if err != nil {
		return nil, usageError{err}
	}
	return tel, nil
}

// finish flushes and stops tel and says where the traces went.
func finishTelemetry(ctx context.Context, tel *telemetry.Telemetry, stderr io.Writer) error {
	if tel == nil {
		return nil
	}
	if err := tel.Shutdown(ctx); err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	if ex := append(append([]string(nil), tel.TraceExporters...), tel.MetricExporters...); len(ex) > 0 {
		seen := map[string]bool{}
		var uniq []string
		for _, e := range ex {
			if !seen[e] {
				seen[e] = true
				uniq = append(uniq, e)
			}
		}
		fmt.Fprintf(stderr, "telemetry: %s (read with: mptx trace analyze)\n", strings.Join(uniq, ", "))
	}
	return nil
}
