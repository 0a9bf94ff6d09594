package main

// `mptx send` over a session (every transport but --direct): Dial, one
// SendAsync per tensor (each waits for room in the session's send buffer,
// so tensors are pipelined), a progress bar over all of them, and a
// summary from the transfers' and the session's statistics.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
	"github.com/mptx-dev/mptx/units"
)

// tensorSource is one tensor to send: a file, or a generated pattern.
type tensorSource struct {
	name string
	file string // "" for a generated tensor
	size units.Bytes
	seed uint64 // generated tensors
}

// load returns the tensor's bytes and the function that releases them.
func (s tensorSource) load() ([]byte, func(), error) {
	if s.file != "" {
		return mapFile(s.file, int64(s.size))
	}
	b := make([]byte, s.size)
	fillPattern(b, s.seed)
	return b, func() {}, nil
}

type sessionSendParams struct {
	addr     string
	tensors  []tensorSource
	cfg      mptx.Config
	via      []string // each path's description from --path, if given
	progress bool
}

// SessionSendSummary is what `mptx send` reports after a session.
type SessionSendSummary struct {
	To          string               `json:"to"`
	Transport   string               `json:"transport"`
	Tensors     []TensorSummary      `json:"tensors"`
	Bytes       int64                `json:"bytes"`   // bytes of the tensors delivered
	Seconds     float64              `json:"seconds"` // the first SendAsync → the last tensor's end
	Gbps        float64              `json:"gbps"`
	Requeues    int                  `json:"requeues"`     // chunk attempts moved off a failed or stalled path (these tensors)
	Resets      uint64               `json:"resets"`       // path resets (fences; on TCP a new connection)
	ResetErrors uint64               `json:"reset_errors"` // resets that failed
	Paths       []SessionPathSummary `json:"paths"`
	OK          bool                 `json:"ok"` // every tensor delivered and checked by the receiver
}

// TensorSummary is one tensor of a SessionSendSummary.
type TensorSummary struct {
	Name     string  `json:"name"`
	File     string  `json:"file,omitempty"`
	Bytes    int64   `json:"bytes"`
	Seconds  float64 `json:"seconds"` // SendAsync → the receiver's receipt
	Staged   float64 `json:"staged"`  // of Seconds, SendAsync's own: waiting for room, copying into the send buffer, CRC-32C
	Gbps     float64 `json:"gbps"`
	Requeues int     `json:"requeues"`
	Error    string  `json:"error,omitempty"`
}

// SessionPathSummary is one path of a SessionSendSummary.
type SessionPathSummary struct {
	Path     int     `json:"path"`
	Via      string  `json:"via"`      // the --path spec, or the backend's device
	Bytes    int64   `json:"bytes"`    // bytes of these tensors the path carried (retries included)
	Share    float64 `json:"share"`    // of all paths' Bytes
	Requeues int     `json:"requeues"` // the engine's count over the session
	Downs    int     `json:"downs"`    // times the path was lost
	State    string  `json:"state"`
	Reason   string  `json:"reason,omitempty"` // why it was last lost
	SRTT     string  `json:"srtt"`
	MinRTT   string  `json:"min_rtt"`
	Error    string  `json:"error,omitempty"` // the backend's latest error on the path
}

// authError says, in one line, that the two ends hold different secrets
// (either end's proof failed).
type authError struct {
	addr string
	err  error
}

func (e authError) Error() string {
	return fmt.Sprintf("%s: authentication failed: the receiver does not share our secret (use the same --secret-file or MPTX_SECRET on both ends)", e.addr)
}

func (e authError) Unwrap() error { return e.err }

// runSendSession ships p.tensors over one session. The summary is nil
// only when no session was made.
func runSendSession(ctx context.Context, p sessionSendParams) (*SessionSendSummary, error) {
	sess, err := mptx.Dial(ctx, p.addr, p.cfg)
	if err != nil {
		if errors.Is(err, bootstrap.ErrAuth) {
			return nil, authError{p.addr, err}
		}
		if cause := stopped(ctx); cause != nil {
			return nil, cause
		}
		return nil, err
	}
	defer sess.Close()

	var total units.Bytes
	for _, t := range p.tensors {
		total += t.size
	}
	what := fmt.Sprintf("sending %d tensors", len(p.tensors))
	if len(p.tensors) == 1 {
		what = "sending " + p.tensors[0].name
	}
	bar := newBar(p.progress, total, what)
	var (
		mu        sync.Mutex
		transfers = make([]*mptx.Transfer, 0, len(p.tensors))
	)
	// The monitor refreshes the bar and keeps a recent snapshot of the
	// session's paths: a receiver that stops after its last tensor
	// (recv --count) may end the session before the final snapshot.
	var last *mptx.SessionStats
	stopMon := make(chan struct{})
	monDone := make(chan struct{})
	go func() {
		defer close(monDone)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopMon:
				if bar != nil {
					_ = bar.Finish()
				}
				return
			case <-tick.C:
			}
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := sess.Stats(sctx)
			cancel()
			var acked units.Bytes
			mu.Lock()
			if err == nil {
				last = &st
			}
			for _, t := range transfers {
				a, _ := t.Progress()
				acked += a
			}
			mu.Unlock()
			if bar != nil {
				_ = bar.Set64(int64(min(acked, total)))
			}
		}
	}()

	var start time.Time // the first SendAsync: loading the first tensor is not the transfer's
	sum := &SessionSendSummary{To: p.addr, Transport: string(sess.Transport()), OK: true}
	failed := make([]error, len(p.tensors))
	staged := make([]time.Duration, len(p.tensors))
	for i, src := range p.tensors {
		if ctx.Err() != nil {
			failed[i] = fmt.Errorf("not sent: %w", context.Cause(ctx))
			continue
		}
		data, release, err := src.load()
		if err != nil {
			failed[i] = err
			continue
		}
		t0 := time.Now()
		if start.IsZero() {
			start = t0
		}
		t, err := sess.SendAsync(ctx, src.name, data)
		staged[i] = time.Since(t0)
		if err != nil {
			release()
			failed[i] = err
			continue
		}
		mu.Lock()
		transfers = append(transfers, t)
		mu.Unlock()
		// The session may read data until the transfer ends (over TCP
		// it sends straight from the mapped file): unmap only then.
		go func() {
			<-t.Done()
			release()
		}()
	}
	for _, t := range transfers {
		<-t.Done() // cancellation reaches every transfer through ctx
	}
	var elapsed time.Duration
	if !start.IsZero() {
		elapsed = time.Since(start)
	}
	close(stopMon)
	<-monDone

	pathBytes := map[int]units.Bytes{}
	next := 0
	for i, src := range p.tensors {
		ts := TensorSummary{Name: src.name, File: src.file, Bytes: int64(src.size), Staged: staged[i].Seconds()}
		err := failed[i]
		if err == nil {
			t := transfers[next]
			next++
			st := t.Stats()
			err = t.Err()
			ts.Seconds, ts.Requeues = st.Duration.Seconds(), st.Requeues
			sum.Requeues += st.Requeues
			for j, b := range st.PathBytes {
				pathBytes[j] += b
			}
			if err == nil {
				ts.Gbps = gbps(src.size, st.Duration)
				sum.Bytes += int64(src.size)
			}
		}
		if err != nil {
			ts.Error = oneLine(err)
			sum.OK = false
		}
		sum.Tensors = append(sum.Tensors, ts)
	}
	sum.Seconds = elapsed.Seconds()
	sum.Gbps = gbps(units.Bytes(sum.Bytes), elapsed)

	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, serr := sess.Stats(sctx)
	if serr != nil && last != nil {
		st, serr = *last, nil // at most 100 ms old
	}
	var carried units.Bytes
	for _, b := range pathBytes {
		carried += b
	}
	n := len(st.Paths)
	for i := range pathBytes {
		n = max(n, i+1)
	}
	for i := 0; i < n; i++ {
		s := SessionPathSummary{Path: i, Bytes: int64(pathBytes[i]), State: "unknown (the session ended)"}
		if i < len(st.Paths) {
			ps := st.Paths[i]
			s.Via, s.Requeues, s.Downs, s.State, s.Reason = ps.Info.Device, ps.Engine.Requeues, ps.Engine.Downs, ps.Engine.State.String(), ps.Engine.Reason
			s.SRTT, s.MinRTT, s.Error = ps.Engine.SRTT.String(), ps.Engine.MinRTT.String(), ps.Err
		}
		if i < len(p.via) {
			s.Via = p.via[i]
		}
		if carried > 0 {
			s.Share = float64(pathBytes[i]) / float64(carried)
		}
		sum.Paths = append(sum.Paths, s)
	}
	sum.Resets, sum.ResetErrors = st.Resets, st.ResetErrors

	if cause := stopped(ctx); cause != nil {
		return sum, cause
	}
	if !sum.OK {
		var first error
		n := 0
		for i, ts := range sum.Tensors {
			if ts.Error != "" {
				n++
				if first == nil {
					first = fmt.Errorf("%s: %s", p.tensors[i].name, ts.Error)
				}
			}
		}
		if n == 1 {
			return sum, first
		}
		return sum, fmt.Errorf("%d of %d tensors failed; first: %w", n, len(sum.Tensors), first)
	}
	return sum, nil
}

func printSessionSendSummary(w io.Writer, s *SessionSendSummary, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s)
		return
	}
	ok := 0
	for _, t := range s.Tensors {
		if t.Error == "" {
			ok++
		}
	}
	fmt.Fprintf(w, "sent %d of %d tensors to %s over %s: %v in %.3f s, %.3f Gbit/s; %d requeues, %d resets",
		ok, len(s.Tensors), s.To, s.Transport, humanBytes(units.Bytes(s.Bytes)), s.Seconds, s.Gbps, s.Requeues, s.Resets)
	if s.ResetErrors > 0 {
		fmt.Fprintf(w, " (%d failed)", s.ResetErrors)
	}
	fmt.Fprintln(w)
	{
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "tensor\tbytes\tseconds\tstaged\tGbit/s\trequeues\tresult\t")
		for _, t := range s.Tensors {
			res := "ok"
			if t.Error != "" {
				res = t.Error
			}
			fmt.Fprintf(tw, "%s\t%v\t%.3f\t%.3f\t%.3f\t%d\t%s\t\n", displayName(t.Name), humanBytes(units.Bytes(t.Bytes)), t.Seconds, t.Staged, t.Gbps, t.Requeues, res)
		}
		_ = tw.Flush()
	}
	if len(s.Paths) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "path\tvia\tbytes\tshare\trequeues\tdowns\tstate\tsrtt\tmin rtt\t")
	for _, p := range s.Paths {
		state := p.State
		if p.Reason != "" {
			state += " (last lost: " + p.Reason + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%v\t%.1f%%\t%d\t%d\t%s\t%s\t%s\t\n", p.Path, p.Via, humanBytes(units.Bytes(p.Bytes)), 100*p.Share,
			p.Requeues, p.Downs, state, p.SRTT, p.MinRTT)
	}
	_ = tw.Flush()
	for _, p := range s.Paths {
		if p.Error != "" {
			fmt.Fprintf(w, "path %d: %s\n", p.Path, p.Error)
		}
	}
}
