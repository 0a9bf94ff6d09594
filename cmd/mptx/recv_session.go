package main

// `mptx recv` over sessions (every transport but --direct): one listener, one
// goroutine per accepted session receiving its tensors in turn, writing
// each to --out, until a signal or --count.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"time"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/units"
)

type sessionRecvParams struct {
	listen string
	cfg    mptx.Config
	out    *outDir // nil: discard after checking
	count  int     // stop after this many tensors ended; 0: never
	asJSON bool
}

// RecvResult is what `mptx recv` reports for each tensor, one per line.
type RecvResult struct {
	Name    string  `json:"name"`
	File    string  `json:"file,omitempty"` // where --out wrote it
	From    string  `json:"from"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"` // grant → the sender's end of the transfer
	Gbps    float64 `json:"gbps"`
	CRC32C  string  `json:"crc32c,omitempty"` // checked; "" with --no-crc on the sender
	Error   string  `json:"error,omitempty"`
}

// errCountReached ends the serving loop after --count tensors.
var errCountReached = errors.New("--count tensors received")

// receiver serves sessions; its methods are safe for concurrent use.
type receiver struct {
	p      sessionRecvParams
	stdout io.Writer
	log    io.Writer
	stop   context.CancelCauseFunc

	mu       sync.Mutex // guards the fields below and orders the output
	sessions map[*mptx.Session]struct{}
	ended    int
	failed   int
}

func runRecvSession(ctx context.Context, stdout, log io.Writer, p sessionRecvParams) error {
	ln, err := mptx.Listen(p.listen, p.cfg)
	if err != nil {
		return err
	}
	defer ln.Close()
	sctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	r := &receiver{p: p, stdout: stdout, log: log, stop: stop, sessions: map[*mptx.Session]struct{}{}}
	where := "discarding tensors after checking them"
	if p.out != nil {
		where = "writing tensors to " + p.out.path
	}
	fmt.Fprintf(log, "mptx recv: listening on %v (transport %s, %v per session); %s\n", ln.Addr(), cfgTransport(p.cfg), p.cfg.RegionSize, where)
	var wg sync.WaitGroup
	for {
		s, err := ln.Accept(sctx)
		if err != nil {
			break
		}
		r.mu.Lock()
		r.sessions[s] = struct{}{}
		r.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.serve(sctx, s)
		}()
	}
	// Stopped: close the listener, then every session (the sender's
	// transfers in progress fail, and it is told).
	ln.Close()
	r.mu.Lock()
	for s := range r.sessions {
		s.Close()
	}
	r.mu.Unlock()
	wg.Wait()
	if cause := stopped(ctx); cause != nil {
		return cause
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed > 0 {
		return fmt.Errorf("%d of %d tensors failed", r.failed, r.ended)
	}
	if !errors.Is(context.Cause(sctx), errCountReached) {
		return context.Cause(sctx)
	}
	return nil
}

func cfgTransport(c mptx.Config) mptx.Transport {
	if c.Transport == "" {
		return mptx.TransportAuto
	}
	return c.Transport
}

// serve receives s's tensors until it ends or ctx does.
func (r *receiver) serve(ctx context.Context, s *mptx.Session) {
	defer func() {
		r.mu.Lock()
		delete(r.sessions, s)
		r.mu.Unlock()
		s.Close()
		// Give the session's region back to the OS now. The session
		// allocates its region on the Go heap; left to the collector,
		// the next session's region reuses the freed spans and must
		// zero them first: with 1 GiB regions that took seconds here,
		// long enough for the next sender's handshake to time out.
		// Pages returned to the OS come back zeroed for free.
		debug.FreeOSMemory()
	}()
	from := s.RemoteAddr()
	paths := 0
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if st, err := s.Stats(sctx); err == nil {
		paths = len(st.Paths)
	}
	cancel()
	r.logf("session from %s: %s, %d paths", from, s.Transport(), paths)
	var n int
	var bytes units.Bytes
	for {
		var tn *mptx.Tensor
		err := ctx.Err()
		if err == nil {
			tn, err = s.Recv(ctx)
		}
		var te *mptx.TransferError
		switch {
		case errors.As(err, &te):
			r.report(RecvResult{Name: te.Name, From: from, Error: oneLine(te.Err)})
			continue
		case err != nil:
			why := "closed"
			if ctx.Err() != nil {
				why = "closed by recv (" + context.Cause(ctx).Error() + ")"
			} else if e := s.Err(); e != nil && !errors.Is(e, mptx.ErrSessionClosed) {
				why = oneLine(e)
			} else if e != nil {
				why = "closed by the sender"
			}
			r.logf("session from %s ended after %d tensors (%v): %s", from, n, humanBytes(bytes), displayName(why))
			return
		}
		res := RecvResult{Name: tn.Name, From: from, Bytes: int64(len(tn.Data)), Seconds: tn.Took.Seconds(),
			Gbps: gbps(units.Bytes(len(tn.Data)), tn.Took)}
		if tn.CRC32C != 0 {
			res.CRC32C = fmt.Sprintf("%08x", tn.CRC32C)
		}
		if r.p.out != nil {
			file, err := r.p.out.write(tn.Name, tn.Data)
			if err != nil {
				res.Error = oneLine(err)
			}
			res.File = file
		}
		tn.Release()
		n++
		bytes += units.Bytes(res.Bytes)
		r.report(res)
	}
}

// report prints one tensor's line and counts it toward --count.
func (r *receiver) report(res RecvResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p.asJSON {
		b, _ := json.Marshal(res)
		fmt.Fprintf(r.stdout, "%s\n", b)
	} else if res.Error != "" {
		fmt.Fprintf(r.stdout, "failed %s from %s: %s\n", displayName(res.Name), res.From, displayName(res.Error))
	} else {
		crc := "no CRC"
		if res.CRC32C != "" {
			crc = "CRC-32C " + res.CRC32C + " ok"
		}
		dest := "discarded"
		if res.File != "" {
			dest = "-> " + res.File
		}
		fmt.Fprintf(r.stdout, "received %s (%v) from %s in %.3f s, %.3f Gbit/s, %s; %s\n",
			displayName(res.Name), humanBytes(units.Bytes(res.Bytes)), res.From, res.Seconds, res.Gbps, crc, dest)
	}
	r.ended++
	if res.Error != "" {
		r.failed++
	}
	if r.p.count > 0 && r.ended >= r.p.count {
		r.stop(errCountReached)
	}
}

func (r *receiver) logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.log, "mptx recv: "+format+"\n", args...)
}
