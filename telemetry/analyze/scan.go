package analyze

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// MaxLine is the longest input line (one OTLP export request, or one
// Jaeger response chunk) Scan reads, and the largest pretty-printed
// document: 256 MiB. Longer input is an error naming the source and line,
// which bounds Scan's memory to a few lines per decoding goroutine.
const MaxLine = 256 << 20

// Source is one input of Scan: a file, standard input, or a Jaeger query.
type Source struct {
	// Name labels errors ("spans.jsonl", "-", "jaeger http://…").
	Name string
	// Open returns the source's bytes; Scan closes them.
	Open func(ctx context.Context) (io.ReadCloser, error)
}

// FileSources returns the sources for args: files, directories (their
// *.json, *.jsonl and *.ndjson files, also gzipped (*.gz), recursively, in
// name order) and "-" for standard input. A directory holding no such
// file, or a path that does not exist, is an error.
func FileSources(args ...string) ([]Source, error) {
	var out []Source
	for _, a := range args {
		if a == "-" {
			out = append(out, Source{Name: "-", Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(os.Stdin), nil }})
			continue
		}
		st, err := os.Stat(a)
		if err != nil {
			return nil, fmt.Errorf("analyze: %w", err)
		}
		if !st.IsDir() {
			out = append(out, fileSource(a))
			continue
		}
		n := len(out)
		err = filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			name := strings.TrimSuffix(d.Name(), ".gz")
			for _, ext := range []string{".json", ".jsonl", ".ndjson"} {
				if strings.HasSuffix(name, ext) {
					out = append(out, fileSource(p))
					break
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("analyze: %w", err)
		}
		if len(out) == n {
			return nil, fmt.Errorf("analyze: directory %s holds no *.json, *.jsonl or *.ndjson file (gzipped or not)", a)
		}
		slices.SortFunc(out[n:], func(x, y Source) int { return strings.Compare(x.Name, y.Name) })
	}
	return out, nil
}

func fileSource(path string) Source {
	return Source{Name: path, Open: func(context.Context) (io.ReadCloser, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("analyze: %w", err)
		}
		return f, nil
	}}
}

// ScanConfig configures Scan. The zero value analyses every transfer with
// the default options and keeps none whole.
type ScanConfig struct {
	Options Options
	Filter  Filter
	// Detail keeps up to this many selected transfers whole
	// (Summary.Transfers): for per-transfer tables and timelines.
	Detail int
	// Workers is the number of decoding goroutines; 0 means GOMAXPROCS.
	Workers int
}

// Scan reads every source in order and returns the summary of the
// selected transfers. Input is OTLP JSON lines (mptx's file exporter, the
// OpenTelemetry collector's file exporter: one export request per line,
// traces and metrics mixed), a single pretty-printed OTLP JSON document,
// or Jaeger API v3 responses, gzipped or not. Lines are decoded in
// parallel by pdata's unmarshalers and reduced at once to the few fields
// the analysis uses; transfers are finalized as soon as their spans are
// in (see stream), so memory holds a few lines per decoding goroutine,
// the transfers in flight in the input, a compact record per selected
// transfer and fixed-size histograms, not the spans.
//
// Errors name the source and the line; input without any span or metric
// wraps ErrNoSpans.
func Scan(ctx context.Context, srcs []Source, cfg ScanConfig) (*Summary, error) {
	opt, err := cfg.Options.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := cfg.Filter.Validate(); err != nil {
		return nil, err
	}
	agg := newAggregator(opt, cfg.Filter, cfg.Detail)
	st := newStream(opt, agg)
	mr := newMetricsReader()
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	in := &agg.s.Input
	for _, src := range srcs {
		in.Sources++
		if err := scanSource(ctx, src, workers, st, mr, in); err != nil {
			return nil, err
		}
	}
	st.close()
	in.Duplicates, in.Late = st.dups, st.late
	if in.Spans == 0 && in.MetricLines == 0 {
		names := make([]string, len(srcs))
		for i, s := range srcs {
			names[i] = s.Name
		}
		return nil, fmt.Errorf("analyze: %s: %w", strings.Join(names, ", "), ErrNoSpans)
	}
	if in.Spans > 0 && in.MptxSpans == 0 {
		agg.s.Warnings = append(agg.s.Warnings, fmt.Sprintf("%d spans but none of mptx's (mptx.transfer, mptx.chunk, mptx.receive, mptx.recv.chunk): not an mptx trace?", in.Spans))
	}
	s := agg.finish()
	s.Metrics = mr.summary()
	if s.Metrics != nil && len(s.Metrics.Dropped) > 0 {
		for reason, n := range s.Metrics.Dropped {
			if n > 0 {
				s.Warnings = append(s.Warnings, fmt.Sprintf("the recorders dropped %d items (%s): spans are missing", n, reason))
			}
		}
	}
	if in.Late > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("%d sender chunk spans came after their transfer's span (in a later line) and were left out", in.Late))
	}
	slices.Sort(s.Warnings)
	return s, nil
}

// job is one line to decode; result what a worker made of it.
type job struct {
	seq  int
	line int // 1-based line number in the source
	data []byte
}

type result struct {
	seq     int
	line    int
	recs    []spanRec
	spans   int
	metrics *pmetric.Metrics
	err     error
	fast    bool // decoded by the fast decoder (which copies what it keeps)
}

// scanSource reads one source: a reader splits lines, workers decode them,
// and this goroutine feeds the results, in order, to the stream.
func scanSource(ctx context.Context, src Source, workers int, st *stream, mr *metricsReader, in *InputStats) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rc, err := src.Open(ctx)
	if err != nil {
		return err
	}
	defer rc.Close()
	r, err := maybeGunzip(rc)
	if err != nil {
		return fmt.Errorf("analyze: %s: %w", src.Name, err)
	}
	jobs := make(chan job, 2*workers)
	results := make(chan result, 2*workers)
	var readErr error
	readDone := make(chan struct{})
	var wg sync.WaitGroup
	go func() { // reader
		defer close(readDone)
		defer close(jobs)
		readErr = splitLines(ctx, r, in, jobs)
	}()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fd := newFastDecoder()
			for j := range jobs {
				res := decodeLine(fd, j)
				if res.fast { // pdata's values might point into the line
					putLine(j.data)
				}
				select {
				case results <- res:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(results) }()

	pending := map[int]result{}
	next := 0
	var firstErr error
	for res := range results {
		if firstErr != nil {
			continue // drain
		}
		pending[res.seq] = res
		for {
			r, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			if r.err != nil {
				firstErr = fmt.Errorf("analyze: %s:%d: %w", src.Name, r.line, r.err)
				cancel()
				break
			}
			in.Spans += int64(r.spans)
			in.MptxSpans += int64(len(r.recs))
			if r.metrics != nil {
				in.MetricLines++
				mr.add(*r.metrics)
			}
			st.add(r.recs)
			if r.fast {
				putRecs(r.recs)
			}
		}
	}
	<-readDone
	if firstErr != nil {
		return firstErr
	}
	if readErr != nil {
		return fmt.Errorf("analyze: %s: %w", src.Name, readErr)
	}
	return ctx.Err()
}

// maybeGunzip returns r, decompressed when it starts with gzip's magic.
func maybeGunzip(r io.Reader) (io.Reader, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return bufio.NewReaderSize(zr, 1<<20), nil
	}
	return br, nil
}

// splitLines sends r's non-empty lines to jobs. A first line that is not
// a complete JSON object starts a pretty-printed document: the whole
// input is then one job.
func splitLines(ctx context.Context, r io.Reader, in *InputStats, jobs chan<- job) error {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 1<<20)
	}
	seq, lineNo := 0, 0
	send := func(j job) error {
		select {
		case jobs <- j:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for {
		line, err := readLine(br)
		if len(line) > 0 || err == nil {
			lineNo++
			in.Lines++
			in.Bytes += int64(len(line))
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("line %d: %w", lineNo, err)
		}
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) > 0 {
			if lineNo == 1 && trimmed[0] == '{' && !json.Valid(trimmed) {
				// Perhaps one pretty-printed document spanning lines.
				rest, rerr := io.ReadAll(io.LimitReader(br, MaxLine+1))
				if rerr != nil {
					return fmt.Errorf("reading: %w", rerr)
				}
				if len(line)+len(rest) > MaxLine {
					return fmt.Errorf("line 1 is not a JSON object and the input is longer than %d MiB: not one pretty-printed document", MaxLine>>20)
				}
				doc := append(slices.Clip(line), rest...)
				in.Bytes += int64(len(rest))
				if json.Valid(bytes.TrimSpace(doc)) {
					return send(job{seq: seq, line: 1, data: doc})
				}
				// Not a document either: report line 1.
			}
			if e := send(job{seq: seq, line: lineNo, data: line}); e != nil {
				return e
			}
			seq++
		}
		if err != nil { // io.EOF; a truncated last line is the decoder's to report
			return nil
		}
	}
}

// readLine returns the next line (with its newline), at most MaxLine
// bytes, in a buffer from linePool; it returns io.EOF with the last,
// unterminated line.
func readLine(br *bufio.Reader) ([]byte, error) {
	buf := getLine()
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf)+len(frag) > MaxLine {
			return nil, fmt.Errorf("longer than %d MiB (MaxLine)", MaxLine>>20)
		}
		buf = append(buf, frag...)
		if err == nil {
			return buf, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return buf, err
		}
	}
}

// linePool recycles line buffers: the decoders copy what they keep, so a
// line's buffer is free once it is decoded. Buffers over 4 MiB are left
// to the collector.
var linePool sync.Pool

func getLine() []byte {
	if b, ok := linePool.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, 64<<10)
}

func putLine(b []byte) {
	if cap(b) <= 4<<20 {
		linePool.Put(&b)
	}
}

// decodeLine decodes one line: traces (OTLP, or Jaeger's {"result": …})
// into span records, by the fast decoder or, when it declines, pdata's
// unmarshaler; metrics with pdata's metrics unmarshaler; logs skipped.
func decodeLine(fd *fastDecoder, j job) result {
	res := result{seq: j.seq, line: j.line}
	data := bytes.TrimSpace(j.data)
	switch signal(data) {
	case "metrics":
		md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(data)
		if err != nil {
			res.err = fmt.Errorf("invalid OTLP JSON metrics: %w", err)
			return res
		}
		res.metrics = &md
		return res
	case "logs":
		return res
	}
	if recs, spans, err := fd.decode(data); err == nil {
		res.recs, res.spans, res.fast = recs, spans, true
		return res
	}
	td, err := parseDoc(data)
	if err != nil {
		hint := ""
		if !bytes.HasSuffix(j.data, []byte("\n")) {
			hint = " (last line has no newline: truncated file?)"
		}
		res.err = fmt.Errorf("invalid OTLP JSON%s: %w", hint, err)
		return res
	}
	res.recs, res.spans, res.err = extract(td, nil)
	return res
}

// signal names the OTLP signal of a line from its first key.
func signal(data []byte) string {
	if len(data) < 2 || data[0] != '{' {
		return ""
	}
	rest := bytes.TrimLeft(data[1:], " \t\r\n")
	switch {
	case bytes.HasPrefix(rest, []byte(`"resourceMetrics"`)), bytes.HasPrefix(rest, []byte(`"resource_metrics"`)):
		return "metrics"
	case bytes.HasPrefix(rest, []byte(`"resourceLogs"`)), bytes.HasPrefix(rest, []byte(`"resource_logs"`)):
		return "logs"
	}
	return "traces"
}
