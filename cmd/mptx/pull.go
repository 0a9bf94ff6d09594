package main

// `mptx expose` and `mptx pull`: one-sided transfers. expose maps files and
// lets the sessions that connect to it read them (it registers each file
// once per session, exposes it read-only and hands the session its
// descriptor); pull connects, takes descriptors and reads each object with
// RDMA READs spread over its paths, as a decode worker pulls KV cache out
// of a prefill worker's memory.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/internal/crc32c"
	"github.com/mptx-dev/mptx/units"
)

// oneSidedFlags are the flags expose and pull share.
type oneSidedFlags struct {
	secretFile string
	transport  string
	timeout    time.Duration
	asJSON     bool
	devices    string
	qpTimeout  time.Duration
	retry      int
}

func (o *oneSidedFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.secretFile, "secret-file", "", "file holding the shared secret (default: $MPTX_SECRET); at least 16 bytes, the same on both ends")
	f.StringVar(&o.transport, "transport", "auto", "auto, tcp or verbs: the session's transport (verbs: RDMA READ on RC queue pairs)")
	f.DurationVar(&o.timeout, "timeout", 0, "bound on each control step: handshake, connecting the paths, a reply (default 10s)")
	f.BoolVar(&o.asJSON, "json", false, "one JSON object per line on stdout")
	f.StringVar(&o.devices, "devices", "", "verbs: comma-separated RDMA devices, dev or dev:port (default: every ACTIVE RoCE port)")
	f.DurationVar(&o.qpTimeout, "qp-timeout", 0, "verbs: RC local ACK timeout (default 67ms)")
	f.IntVar(&o.retry, "retry", 0, "verbs: RC transport retry count 1..7 (default 7)")
}

func (o *oneSidedFlags) config() (mptx.Config, error) {
	x := xferFlags{secretFile: o.secretFile}
	secret, err := x.secret()
	if err != nil {
		return mptx.Config{}, err
	}
	tr, err := mptx.ParseTransport(o.transport)
	if err != nil {
		return mptx.Config{}, badInput("--transport %q: want auto, tcp or verbs", o.transport)
	}
	vf := verbsFlags{devices: o.devices, timeout: o.qpTimeout, retry: o.retry}
	vcfg, err := vf.sessionVerbs(0)
	if err != nil {
		return mptx.Config{}, err
	}
	return mptx.Config{Secret: secret, Transport: tr, Timeout: o.timeout, Verbs: vcfg}, nil
}

// exposed is one file expose serves.
type exposed struct {
	name  string
	mem   []byte // loaded into anonymous mapped memory (loadFile): outside the Go heap, so verbs can register it
	unmap func()
}

func init() {
	var (
		of     oneSidedFlags
		listen string
		count  int
	)
	cmd := &cobra.Command{
		Use:   "expose FILE...",
		Short: "Let peers pull files with one-sided RDMA READs (see mptx pull)",
		Long: `expose loads each FILE into memory and listens on --listen for peers that prove
the shared secret. Each session gets, for every FILE, a descriptor of the
whole file (registered with the session's transport, exposed read-only),
named after the file's base name; the peer (mptx pull) then reads the bytes
itself, with RDMA READs spread over its paths: expose takes no part in the
transfer and never writes. Nothing outside the files is reachable: every
request is checked against the descriptor's range and rights, by the NIC on
verbs and by the responder on TCP.

expose serves until it is stopped (Ctrl-C), or, with --count N, until N
sessions have ended. Sessions come and go on stderr.

Exit status: 0 stopped after --count sessions; 130 stopped by Ctrl-C; 2 bad
input (unreadable or empty files); 1 if listening fails.` + oneSidedTransportsHelp,
		Example: `  MPTX_SECRET=$(cat s.key) mptx expose --listen :7472 kv0.bin kv1.bin
  mptx pull --secret-file s.key --count 2 --out pulled 10.0.0.1:7472`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := of.config()
			if err != nil {
				return err
			}
			if count < 0 {
				return badInput("--count %d: want 0 (serve until stopped) or more", count)
			}
			var files []exposed
			defer func() {
				for _, f := range files {
					f.unmap()
				}
			}()
			for _, a := range args {
				st, err := os.Stat(a)
				if err != nil {
					return badInput("%v", err)
				}
				if !st.Mode().IsRegular() || st.Size() == 0 {
					return badInput("%s: want a non-empty regular file", a)
				}
				mem, unmap, err := loadFile(a, st.Size())
				if err != nil {
					return badInput("%v", err)
				}
				files = append(files, exposed{name: filepath.Base(a), mem: mem, unmap: unmap})
			}
			ctx, stop := signalContext()
			defer stop()
			err = runExpose(ctx, cmd.ErrOrStderr(), listen, cfg, files, count)
			if cause := stopped(ctx); cause != nil {
				return cause
			}
			return err
		},
	}
	of.register(cmd)
	cmd.Flags().StringVar(&listen, "listen", ":7472", "TCP address to listen on (HOST:PORT; port 0 picks a free one)")
	cmd.Flags().IntVar(&count, "count", 0, "exit after this many sessions have ended (0 = serve until stopped)")
	addCommand(cmd)
}

func runExpose(ctx context.Context, log io.Writer, listen string, cfg mptx.Config, files []exposed, count int) error {
	cfg.RegionSize = units.MiB // pushes are not what expose is for
	ln, err := mptx.Listen(listen, cfg)
	if err != nil {
		return err
	}
	defer ln.Close()
	var total units.Bytes
	for _, f := range files {
		total += units.Bytes(len(f.mem))
	}
	fmt.Fprintf(log, "mptx expose: listening on %v (transport %s); %d files, %v\n", ln.Addr(), cfgTransport(cfg), len(files), humanBytes(total))
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	ended := 0
	for {
		s, err := ln.Accept(sctx)
		if err != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveExposed(sctx, log, s, files)
			mu.Lock()
			ended++
			if count > 0 && ended >= count {
				cancel()
			}
			mu.Unlock()
		}()
	}
	ln.Close()
	wg.Wait()
	return nil
}

// serveExposed registers and exposes every file for session s, sends the
// descriptors, and waits for the session to end.
func serveExposed(ctx context.Context, log io.Writer, s *mptx.Session, files []exposed) {
	defer s.Close()
	from := s.RemoteAddr()
	for _, f := range files {
		reg, err := s.Register(f.mem)
		var d mptx.Descriptor
		if err == nil {
			d, err = reg.Expose(0, units.Bytes(len(f.mem)), mptx.AccessRead)
		}
		if err == nil {
			err = s.SendDescriptor(ctx, f.name, d)
		}
		if err != nil {
			fmt.Fprintf(log, "mptx expose: session from %s: exposing %s: %v\n", from, displayName(f.name), oneLine(err))
			return
		}
	}
	fmt.Fprintf(log, "mptx expose: session from %s (%s): %d files exposed\n", from, s.Transport(), len(files))
	select {
	case <-s.Done():
		fmt.Fprintf(log, "mptx expose: session from %s ended\n", from)
	case <-ctx.Done():
	}
}

// PullResult is what `mptx pull` reports for each object, one per line.
type PullResult struct {
	Name      string  `json:"name"`
	File      string  `json:"file,omitempty"` // where --out wrote it
	Bytes     int64   `json:"bytes"`
	Seconds   float64 `json:"seconds"`
	Gbps      float64 `json:"gbps"`
	CRC32C    string  `json:"crc32c"`
	PathBytes []int64 `json:"path_bytes"`
	Requeues  int     `json:"requeues"`
	Error     string  `json:"error,omitempty"`
}

func init() {
	var (
		of     oneSidedFlags
		paths  int
		count  int
		out    string
		pool   string
		stage  string
		tensor string
		stall  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "pull ADDR",
		Short: "Pull objects a peer exposes (mptx expose) with one-sided RDMA READs",
		Long: `pull connects to ADDR (an mptx expose, or any program that exposes memory
through an mptx session and sends its descriptors), takes --count
descriptors, and reads each object with RDMA READs: the reads are cut into
chunks and spread over the session's paths (--paths), paced and
congestion-controlled by this end, which decides when each READ goes out.
The peer's application takes no part. Each object is read into this
process's registered pool (--pool) when it fits, else through the staging
buffer, and written to --out DIR under its name (the same safe naming as
mptx recv), or discarded. One line per object on stdout: its size, time,
rate, CRC-32C and the bytes each path carried.

Exit status: 0 every object pulled; 1 a pull failed; 2 bad input; 130
stopped by Ctrl-C.` + oneSidedTransportsHelp,
		Example: `  mptx pull --secret-file s.key --out pulled 10.0.0.1:7472
  mptx pull --transport verbs --count 2 --json 10.0.0.1:7472`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := of.config()
			if err != nil {
				return err
			}
			if count < 1 {
				return badInput("--count %d: want 1 or more", count)
			}
			if paths < 1 {
				return badInput("--paths %d: want 1 or more", paths)
			}
			cfg.Paths = paths
			cfg.Engine.MinTimeout = stall
			if cfg.Pool, err = units.ParseBytes(pool); err != nil || cfg.Pool < 0 {
				return badInput("--pool %q: want a size such as 1GiB, or 0", pool)
			}
			if cfg.SendBuffer, err = units.ParseBytes(stage); err != nil || cfg.SendBuffer <= 0 {
				return badInput("--stage %q: want a size such as 64MiB", stage)
			}
			var od *outDir
			if out != "" {
				if od, err = openOutDir(out); err != nil {
					return err
				}
				defer od.Close()
			}
			ctx, stop := signalContext()
			defer stop()
			err = runPull(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], cfg, count, od, tensor, of.asJSON)
			if cause := stopped(ctx); cause != nil {
				return cause
			}
			return err
		},
	}
	of.register(cmd)
	f := cmd.Flags()
	f.IntVar(&paths, "paths", mptx.DefaultPaths, "paths (TCP connections, or verbs queue pairs) to read over")
	f.IntVar(&count, "count", 1, "descriptors to take and pull")
	f.StringVar(&out, "out", "", "directory to write each object to, as a file named after it (default: discard)")
	f.StringVar(&pool, "pool", "256MiB", "registered pool objects are read into in place (0: none, every read staged)")
	f.StringVar(&stage, "stage", "64MiB", "staging buffer for objects larger than the pool")
	f.StringVar(&tensor, "name", "", "pull only the descriptor of this name (the others are skipped)")
	f.DurationVar(&stall, "stall-timeout", 0, "floor of the per-path stall timeout (0: the transport's default); raise it on slow links")
	addCommand(cmd)
}

func runPull(ctx context.Context, stdout, log io.Writer, addr string, cfg mptx.Config, count int, od *outDir, only string, asJSON bool) error {
	s, err := mptx.Dial(ctx, addr, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Fprintf(log, "mptx pull: connected to %s (%s)\n", addr, s.Transport())
	failed := 0
	for n := 0; n < count; {
		name, d, err := s.RecvDescriptor(ctx)
		if err != nil {
			return fmt.Errorf("waiting for descriptor %d of %d: %w", n+1, count, err)
		}
		if only != "" && name != only {
			continue
		}
		n++
		r := pullOne(ctx, s, cfg.Pool, name, d, od)
		if r.Error != "" {
			failed++
		}
		if asJSON {
			b, _ := json.Marshal(r)
			fmt.Fprintf(stdout, "%s\n", b)
		} else if r.Error != "" {
			fmt.Fprintf(stdout, "%s: FAILED: %s\n", displayName(name), r.Error)
		} else {
			fmt.Fprintf(stdout, "%s: %s in %.3fs (%.2f Gb/s), CRC-32C %s, bytes by path %v%s\n", displayName(name), humanBytes(units.Bytes(r.Bytes)),
				r.Seconds, r.Gbps, r.CRC32C, r.PathBytes, map[bool]string{true: " -> " + r.File, false: ""}[r.File != ""])
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d pulls failed", failed, count)
	}
	return nil
}

// pullOne reads the object d names into a pool Buffer when it fits, else
// into Go memory through the staging buffer.
func pullOne(ctx context.Context, s *mptx.Session, pool units.Bytes, name string, d mptx.Descriptor, od *outDir) PullResult {
	r := PullResult{Name: name, Bytes: int64(d.Len)}
	fail := func(err error) PullResult { r.Error = oneLine(err); return r }
	var local []byte
	if d.Len <= pool {
		b, err := s.Alloc(d.Len)
		if err == nil {
			defer b.Free()
			local = b.Bytes()
		}
	}
	if local == nil {
		local = make([]byte, d.Len)
	}
	start := time.Now()
	op, err := s.ReadAsync(ctx, []mptx.Pair{{Local: local, Remote: d}})
	if err != nil {
		return fail(err)
	}
	err = op.Wait(ctx)
	took := time.Since(start)
	st := op.Stats()
	for _, b := range st.PathBytes {
		r.PathBytes = append(r.PathBytes, int64(b))
	}
	r.Requeues = st.Requeues
	if err != nil {
		return fail(err)
	}
	r.Seconds, r.Gbps = took.Seconds(), gbps(d.Len, took)
	r.CRC32C = fmt.Sprintf("%08x", crc32c.Checksum(local))
	if od != nil {
		if r.File, err = od.write(name, local); err != nil {
			return fail(err)
		}
	}
	return r
}
