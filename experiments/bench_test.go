package experiments

import (
	"context"
	"testing"
)

var sinkResult *Result

// BenchmarkSimRun measures one small incast run end to end (fabric build,
// connections, simulation, metrics): simulator events per second is the
// figure that sizes a sweep.
func BenchmarkSimRun(b *testing.B) {
	s := mustParse(b, `name: bench
topology: {kind: star, hosts: 9}
switch: {buffer: 4MiB}
workloads: [{kind: incast, senders: "1-8", receiver: 0, size: 4MiB}]
matrix: {cc: [dcqcn]}
`)
	run := Expand(s)[0]
	b.ReportAllocs()
	var events uint64
	for b.Loop() {
		res, err := SimRun(context.Background(), run)
		if err != nil {
			b.Fatal(err)
		}
		events += res.Row.Events
		sinkResult = res
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkParse measures parsing and validating a spec with every section.
func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseFile("testdata/specs/full.yaml"); err != nil {
			b.Fatal(err)
		}
	}
}
