package analyze

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/telemetry/internal/corpus"
)

// corpusFile returns the path of the corpus generated with cfg, generating
// it once into the cache directory (MPTX_CORPUS_DIR, else the OS temp
// directory): the full corpus is about 800 MB and takes a minute.
func corpusFile(tb testing.TB, name string, cfg corpus.Config) (string, corpus.Stats) {
	tb.Helper()
	dir := os.Getenv("MPTX_CORPUS_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "mptx-corpus")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	// The generator's version is in the name: change it when the corpus
	// changes.
	path := filepath.Join(dir, "corpus-v1-"+name+".otlp.jsonl")
	statsPath := path + ".stats"
	if b, err := os.ReadFile(statsPath); err == nil {
		var st corpus.Stats
		if _, err := fmt.Sscan(string(b), &st.Transfers, &st.Failed, &st.Stalled, &st.SlowPath, &st.SenderChunkSpans, &st.RecvChunkSpans); err == nil {
			if _, err := os.Stat(path); err == nil {
				return path, st
			}
		}
	}
	start := time.Now()
	f, err := os.Create(path + ".tmp")
	if err != nil {
		tb.Fatal(err)
	}
	st, err := corpus.Generate(f, cfg)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(statsPath, fmt.Appendf(nil, "%d %d %d %d %d %d", st.Transfers, st.Failed, st.Stalled, st.SlowPath, st.SenderChunkSpans, st.RecvChunkSpans), 0o644); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("generated %s (%+v) in %v", path, st, time.Since(start).Round(time.Millisecond))
	return path, st
}

// small is a corpus with the default's faults, 1,600 transfers of 20
// chunks.
var small = func() corpus.Config {
	c := corpus.Default
	c.Transfers, c.Chunks = 1600, 20
	return c
}()

// TestCorpusFindings scans a generated corpus with two planted faults (a
// slow path on one sender, a receiver whose application stalls for a
// third of the hour) and planted failures, and checks that the aggregate
// report names each, with the right counts, and that the failures are
// listed (which makes `mptx trace analyze` exit 1).
func TestCorpusFindings(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: generates and scans a 1,600-transfer corpus")
	}
	path, st := corpusFile(t, "small", small)
	srcs, err := FileSources(path)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := Scan(context.Background(), srcs, ScanConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var tbl bytes.Buffer
	if err := sum.WriteTable(&tbl); err != nil {
		t.Fatal(err)
	}
	t.Logf("aggregate report:\n%s", tbl.String())
	if sum.Selected != st.Transfers {
		t.Errorf("selected %d transfers, generated %d", sum.Selected, st.Transfers)
	}
	if sum.Failed != st.Failed || len(sum.FailedTransfers) != min(st.Failed, MaxListed) {
		t.Errorf("failed %d (listed %d), planted %d", sum.Failed, len(sum.FailedTransfers), st.Failed)
	}
	if want := int64(st.SenderChunkSpans + st.RecvChunkSpans); sum.Input.MptxSpans < want {
		t.Errorf("read %d mptx spans, generated at least %d chunk spans", sum.Input.MptxSpans, want)
	}
	find := func(prefix string) string {
		for _, f := range sum.Findings {
			if strings.HasPrefix(f, prefix) {
				return f
			}
		}
		t.Errorf("no %q finding in %q", prefix, sum.Findings)
		return ""
	}
	slow := find("slow path: ")
	if want := fmt.Sprintf("%s path %d (%s, eth%d)", corpus.SenderName(corpus.Default.SlowSender), corpus.Default.SlowPath,
		corpus.Device(corpus.Default.SlowPath), corpus.Default.SlowPath); !strings.Contains(slow, want) {
		t.Errorf("slow-path finding %q does not name %s", slow, want)
	}
	if len(sum.Bottlenecks) == 0 || sum.Bottlenecks[0].Service != corpus.SenderName(corpus.Default.SlowSender) || sum.Bottlenecks[0].Path != corpus.Default.SlowPath {
		t.Errorf("most frequent bottleneck %+v, want the planted slow path", sum.Bottlenecks)
	} else if b := sum.Bottlenecks[0]; b.Count < st.SlowPath*9/10 {
		t.Errorf("the slow path was the bottleneck of %d transfers, want nearly all %d of its sender's", b.Count, st.SlowPath)
	}
	stall := find("receiver stall: ")
	if !strings.Contains(stall, corpus.ReceiverName(corpus.Default.StallReceiver)) || !strings.Contains(stall, "hand-off") {
		t.Errorf("stall finding %q does not name %s and the hand-off", stall, corpus.ReceiverName(corpus.Default.StallReceiver))
	}
	if len(sum.Stalls) != 1 || sum.Stalls[0].Count != st.Stalled {
		t.Errorf("stall groups %+v, want one with the %d planted stalled transfers", sum.Stalls, st.Stalled)
	}
	find("failed: ")

	// Filters: the stalled receiver's transfers in the middle third.
	f := Filter{Service: corpus.ReceiverName(corpus.Default.StallReceiver),
		Since: corpus.Default.Start.Add(corpus.Default.Window / 3), Until: corpus.Default.Start.Add(2 * corpus.Default.Window / 3)}
	sub, err := Scan(context.Background(), srcs, ScanConfig{Filter: f, Detail: 3})
	if err != nil {
		t.Fatal(err)
	}
	if sub.Selected != st.Stalled || sub.Receiver == nil || sub.Receiver.Bound != st.Stalled || len(sub.Transfers) != 3 || sub.Transfers[0].ReceiverBound == "" {
		t.Errorf("filtered to the stall: selected %d, receiver-bound %v, kept %d; want %d stalled, 3 kept, receiver-bound", sub.Selected, sub.Receiver, len(sub.Transfers), st.Stalled)
	}
	ok, err := Scan(context.Background(), srcs, ScanConfig{Filter: Filter{Outcomes: []string{"done"}, Service: corpus.SenderName(0)}})
	if err != nil {
		t.Fatal(err)
	}
	if ok.Failed != 0 || ok.Selected == 0 || ok.Selected >= st.Transfers/corpus.Default.Senders+1 {
		t.Errorf("done transfers of one sender: selected %d, failed %d", ok.Selected, ok.Failed)
	}
}

// cpuTime is the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkScanCorpus scans the default corpus: 10,000 transfers, 500,000
// sender and 500,000 receiver chunk spans (plus metrics), about 800 MB of
// OTLP JSON, with every aggregate. It reports the spans per second, the
// seconds per scan and the peak live heap (the memory bound: sampled every
// 10 ms while the scan runs).
func BenchmarkScanCorpus(b *testing.B) {
	path, st := corpusFile(b, "default", corpus.Default)
	srcs, err := FileSources(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for {
			metrics.Read(s)
			if v := s[1].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-tk.C:
			}
		}
	}()
	var sum *Summary
	runtime.GC()
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		sum, err = Scan(context.Background(), srcs, ScanConfig{})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu := (cpuTime() - cpu0).Seconds() / float64(b.N)
	close(stop)
	wg.Wait()
	if sum.Selected != st.Transfers {
		b.Fatalf("selected %d transfers, want %d", sum.Selected, st.Transfers)
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(sec, "s/scan")
	// CPU time (user + system, every thread) per scan: what the scan
	// costs whatever else the machine runs; the wall time is that over
	// the cores it gets.
	b.ReportMetric(cpu, "cpu-s/scan")
	b.ReportMetric(float64(sum.Input.MptxSpans)/sec, "spans/s")
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(sum.Input.Bytes)/(1<<20), "input-MB")
}
