package experiments

import (
	"context"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/sim"
	"github.com/mptx-dev/mptx/vtime"
)

// Observer watches one simulated run, for telemetry (mptx sim --trace,
// mptx exp run --trace): SimRun asks it for a recorder for each
// connection's engine and hands it the fabric's trace events (sim.Tracer:
// PFC pause and resume, CNPs sent, drops, link state), synchronously from
// the run's single goroutine. A nil Observer costs nothing; see
// WithObserver.
type Observer interface {
	// Conn returns the recorder for connection c's engine (nil: none).
	Conn(c ObservedConn) multipath.Recorder
	// Trace receives the fabric's trace events (sim.Tracer).
	sim.Tracer
	// Done is called once, when the run ends, at its last virtual instant.
	Done(now vtime.Time)
}

// ObservedConn describes one connection of a run to its Observer.
type ObservedConn struct {
	Index      int    // in opening order
	Src, Dst   string // host names
	Background bool   // a background-class connection (one path)
	CC         string // the engine's congestion control
	// Paths are the sender's paths (QPN, device, NIC index, line rate);
	// IngressPorts[i] names the switch port facing path i's NIC: the port
	// whose PFC pauses (TrPauseSent) stop that NIC, hence the path.
	Paths        []qp.PathInfo
	IngressPorts []string
}

type observerKey struct{}

// WithObserver returns a context under which SimRun calls newObserver for
// each run it executes and reports to the Observer it returns (nil: not
// observed). It is how a command turns telemetry on for some runs of a
// sweep without the runs' inputs, hence their hashes, changing, in the
// manner of net/http/httptrace.
func WithObserver(ctx context.Context, newObserver func(Run) Observer) context.Context {
	return context.WithValue(ctx, observerKey{}, newObserver)
}

// observerFor returns ctx's Observer for run, or nil.
func observerFor(ctx context.Context, run Run) Observer {
	f, _ := ctx.Value(observerKey{}).(func(Run) Observer)
	if f == nil {
		return nil
	}
	return f(run)
}

// ingressPorts names, for each path of a connection from host src, the
// switch port at the far end of that path's NIC cable ("" when the NIC is
// not cabled to a switch).
func ingressPorts(src *sim.Host, paths []qp.PathInfo) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		if p.NIC < 0 || p.NIC >= len(src.NICs()) {
			continue
		}
		port := src.NIC(p.NIC).Port()
		if port.Cable() == nil {
			continue
		}
		a, b := port.Cable().Ends()
		for _, end := range []*sim.Port{a, b} {
			if end != port && end.Switch() != nil {
				out[i] = end.Name()
			}
		}
	}
	return out
}
