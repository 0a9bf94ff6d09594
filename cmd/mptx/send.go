package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp/verbs"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// castagnoli is the CRC-32C table (the tensor checksum both ends compute).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// verbsFlags are the flags send and recv share.
type verbsFlags struct {
	secretFile string
	devices    string
	pool       string
	timeout    time.Duration
	retry      int
	rnrTimer   time.Duration
	mtu        int
	asJSON     bool
	noProgress bool
	busyPoll   time.Duration
}

func (f *verbsFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.secretFile, "secret-file", "", "file holding the shared secret (default: $MPTX_SECRET); at least 16 bytes")
	fl.StringVar(&f.devices, "devices", "", "comma-separated RDMA devices to use, dev or dev:port (default: every ACTIVE RoCE port; see mptx devices)")
	fl.StringVar(&f.pool, "pool", "", "size of the registered memory pool (default: enough for the tensor)")
	fl.DurationVar(&f.timeout, "qp-timeout", 0, "RC local ACK timeout (default 67ms: 4.096µs·2^14)")
	fl.IntVar(&f.retry, "retry", 0, "RC transport retry count 1..7 (default 7)")
	fl.DurationVar(&f.rnrTimer, "rnr-timer", 0, "minimum RNR NAK timer (default 0.64ms)")
	fl.IntVar(&f.mtu, "mtu", 0, "path MTU 256..4096 (default: the ports' active MTU)")
	fl.BoolVar(&f.asJSON, "json", false, "print the summary as JSON on stdout")
	fl.BoolVar(&f.noProgress, "no-progress", false, "no progress bar")
	fl.DurationVar(&f.busyPoll, "busy-poll", 0, "how long the polling loop spins after activity before it sleeps on the completion channel (default 50µs); raise it where timers are coarse")
}

func (f *verbsFlags) secret() ([]byte, error) {
	var s []byte
	if f.secretFile != "" {
		b, err := os.ReadFile(f.secretFile)
		if err != nil {
			return nil, badInput("--secret-file: %v", err)
		}
		s = []byte(strings.TrimRight(string(b), "\r\n"))
	} else {
		s = []byte(os.Getenv("MPTX_SECRET"))
	}
	if len(s) == 0 {
		return nil, badInput("no shared secret: set --secret-file or MPTX_SECRET (the same on both ends)")
	}
	if len(s) < 16 {
		return nil, badInput("the shared secret is %d bytes; want at least 16", len(s))
	}
	return s, nil
}

func (f *verbsFlags) deviceList() []string {
	if f.devices == "" {
		return nil
	}
	return strings.Split(f.devices, ",")
}

func (f *verbsFlags) qpConfig() (verbs.QPConfig, error) {
	c := verbs.QPConfig{Timeout: f.timeout, RetryCount: f.retry, MinRNRTimer: f.rnrTimer, MTU: units.Bytes(f.mtu)}
	if f.retry < 0 || f.retry > 7 {
		return c, badInput("--retry %d: valid 1..7", f.retry)
	}
	return c, nil
}

func (f *verbsFlags) poolSize(need units.Bytes) (units.Bytes, error) {
	if f.pool == "" {
		return need + 4*units.MiB, nil
	}
	p, err := units.ParseBytes(f.pool)
	if err != nil || p <= 0 {
		return 0, badInput("--pool %q: want a size such as 256MiB", f.pool)
	}
	if p < need {
		return 0, badInput("--pool %v is smaller than the %v needed", p, need)
	}
	return p, nil
}

// signalContext is cancelled on SIGINT.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt)
}

// fillPattern writes the generated tensor: a 64-bit LCG stream seeded by
// seed, so both ends can regenerate it.
func fillPattern(b []byte, seed uint64) {
	x := seed*0x9E3779B97F4A7C15 + 1
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x = x*6364136223846793005 + 1442695040888963407
		v := x ^ x>>29
		b[i], b[i+1], b[i+2], b[i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		b[i+4], b[i+5], b[i+6], b[i+7] = byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
	}
	for ; i < len(b); i++ {
		x = x*6364136223846793005 + 1442695040888963407
		b[i] = byte(x >> 33)
	}
}

// runLocked runs loop on a goroutine locked to its OS thread (the CQ
// polling loop: busy-poll, then sleep on the completion channel) and waits
// for it.
func runLocked(loop func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		errc <- loop()
	}()
	return <-errc
}

// progress steps a driver and refreshes a progress bar at most every
// 100 ms from the loop's goroutine.
type progress struct {
	inner mptx.Stepper
	bar   *progressbar.ProgressBar
	done  func() int64
	last  vtime.Time
}

func (p *progress) Step(now vtime.Time) vtime.Time {
	next := p.inner.Step(now)
	if p.bar != nil && now.Sub(p.last) >= 100*time.Millisecond {
		p.last = now
		_ = p.bar.Set64(p.done())
	}
	return next
}

func newBar(enabled bool, size units.Bytes, what string) *progressbar.ProgressBar {
	if !enabled {
		return nil
	}
	return progressbar.NewOptions64(int64(size),
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowBytes(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetWidth(30),
		progressbar.OptionClearOnFinish(),
	)
}

// PathSummary is one path's line of a send or recv summary.
type PathSummary struct {
	Path     int     `json:"path"`
	Device   string  `json:"device"`
	QPN      uint32  `json:"qpn"`
	SrcPort  uint16  `json:"udp_src_port"`
	Bytes    int64   `json:"bytes"`
	Share    float64 `json:"share"`
	Chunks   int     `json:"chunks"`
	Requeues int     `json:"requeues,omitempty"`
	State    string  `json:"state,omitempty"`
	Reason   string  `json:"reason,omitempty"`
	BaseRTT  string  `json:"base_rtt,omitempty"`
	SRTT     string  `json:"srtt,omitempty"`
	MinRTT   string  `json:"min_rtt,omitempty"`
	Probes   int     `json:"probes,omitempty"`
	Error    string  `json:"error,omitempty"` // the backend's account of why the path is down
}

// SendSummary is what `mptx send` reports.
type SendSummary struct {
	Name       string        `json:"name"`
	Bytes      int64         `json:"bytes"`
	Chunks     int           `json:"chunks"`
	ChunkSize  int64         `json:"chunk_size"`
	Seconds    float64       `json:"seconds"`
	Gbps       float64       `json:"gbps"`
	CRC32C     string        `json:"crc32c,omitempty"`
	Requeues   int           `json:"requeues"`
	Paths      []PathSummary `json:"paths"`
	ReceiverOK bool          `json:"receiver_ok"`
	Receipt    string        `json:"receipt"`
}

func init() {
	var (
		vf         verbsFlags
		to         string
		file       string
		size       string
		seed       uint64
		qpsPerNIC  int
		chunkSize  string
		ccName     string
		policy     string
		inflight   string
		stall      time.Duration
		probeEvery time.Duration
		noCRC      bool
		segment    string
		pfcXoff    string
		noPacing   bool
	)
	cmd := &cobra.Command{
		Use:   "send",
		Short: "Send a file or a generated tensor to an mptx receiver over RDMA (verbs)",
		Long: `send ships one tensor to ` + "`mptx recv`" + ` over RDMA WRITE WITH IMM on several RC queue
pairs: --qps-per-nic on each local NIC (--devices). Both ends authenticate with
the shared secret (HMAC challenge-response); a receiver without it learns
nothing. The tensor is the file --file, or --size bytes generated from --seed.

When it returns: the engine completes the transfer when every chunk's last
WRITE WITH IMM has a successful send completion, i.e. the receiver's RNIC
acknowledged every byte (RC). send then waits for the receiver's receipt,
sent after the receiver saw every chunk's immediate (so every byte is in place)
and, unless --no-crc, checked the CRC-32C; the exit status is 0 only if the
receipt says so. The summary gives throughput, each path's share, requeues and
RTTs.

Soft-RoCE (rdma_rxe), especially in a VM: rxe's cost is per work request and
its ACKs lag under load, so post whole chunks (--chunk 1MiB --segment 1MiB
--pfc-xoff 16MiB), keep more in flight (--max-inflight 16MiB), raise the ACK
timeout (--qp-timeout 500ms) and the stall timeout (--stall-timeout 3s), and
keep --busy-poll short: a spinning process takes CPU from rxe's kernel tasks.
test/rxe uses these settings.`,
		Example: `  MPTX_SECRET=$(cat /etc/mptx.secret) mptx send --to 10.0.0.2:7471 --file weights.bin
  mptx send --to host:7471 --size 1GiB --devices mlx5_0,mlx5_1 --qps-per-nic 4 --secret-file s.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return badInput("--to HOST:PORT is required (the address mptx recv listens on)")
			}
			secret, err := vf.secret()
			if err != nil {
				return err
			}
			qc, err := vf.qpConfig()
			if err != nil {
				return err
			}
			var n units.Bytes
			name := file
			if file != "" {
				st, err := os.Stat(file)
				if err != nil {
					return badInput("--file: %v", err)
				}
				n = units.Bytes(st.Size())
				if n == 0 {
					return badInput("--file %s is empty", file)
				}
			} else {
				if n, err = units.ParseBytes(size); err != nil || n <= 0 {
					return badInput("--size %q: want a positive size such as 64MiB", size)
				}
				name = fmt.Sprintf("generated(seed=%d)", seed)
			}
			cs, err := units.ParseBytes(chunkSize)
			if err != nil {
				return badInput("--chunk %q: %v", chunkSize, err)
			}
			infl, err := units.ParseBytes(inflight)
			if err != nil {
				return badInput("--max-inflight %q: %v", inflight, err)
			}
			seg, err := units.ParseBytes(segment)
			if err != nil {
				return badInput("--segment %q: %v", segment, err)
			}
			xoff, err := units.ParseBytes(pfcXoff)
			if err != nil {
				return badInput("--pfc-xoff %q: %v", pfcXoff, err)
			}
			pol, err := multipath.ParsePolicy(policy)
			if err != nil {
				return badInput("--policy: %v", err)
			}
			if qpsPerNIC < 1 || qpsPerNIC > verbs.MaxQPsPerNIC {
				return badInput("--qps-per-nic %d: valid 1..%d", qpsPerNIC, verbs.MaxQPsPerNIC)
			}
			pool, err := vf.poolSize(n)
			if err != nil {
				return err
			}
			ctx, cancel := signalContext()
			defer cancel()
			sum, err := runSend(ctx, sendParams{
				to: to, file: file, name: name, size: n, seed: seed, secret: secret, devices: vf.deviceList(),
				pool: pool, qpsPerNIC: qpsPerNIC, qp: qc, crc: !noCRC, progress: !vf.noProgress && !vf.asJSON, busyPoll: vf.busyPoll,
				engine: multipath.Config{CC: ccName, Policy: pol, ChunkSize: cs, MaxInFlight: infl, MinTimeout: stall, ProbeInterval: probeEvery,
					Segment: seg, Pacing: multipath.PacingConfig{PFCXoff: xoff, Disabled: noPacing}},
			})
			if sum != nil {
				printSendSummary(cmd.OutOrStdout(), sum, vf.asJSON)
			}
			return err
		},
	}
	vf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&to, "to", "", "receiver address HOST:PORT (required)")
	f.StringVar(&file, "file", "", "file to send (default: a generated tensor of --size)")
	f.StringVar(&size, "size", "64MiB", "size of the generated tensor")
	f.Uint64Var(&seed, "seed", 1, "seed of the generated tensor")
	f.IntVar(&qpsPerNIC, "qps-per-nic", 1, "RC queue pairs (paths) per NIC")
	f.StringVar(&chunkSize, "chunk", "0", "chunk size (0 = automatic, 2-4 MiB)")
	f.StringVar(&ccName, "cc", "dcqcn", "congestion control (dcqcn, timely, swift, hpcc, fixed)")
	f.StringVar(&policy, "policy", "congestion-aware", "path policy: "+strings.Join(multipath.PolicyNames(), ", "))
	f.StringVar(&inflight, "max-inflight", "0", "cap on each path's bytes in flight (0 = two bandwidth-delay products from the measured RTT)")
	f.DurationVar(&stall, "stall-timeout", 0, "floor of the per-path stall timeout (0 = the engine's 10ms); raise it on slow links")
	f.DurationVar(&probeEvery, "probe-interval", 0, "probe idle paths' RTT this often with zero-length WRITE WITH IMM (0 = only when needed)")
	f.BoolVar(&noCRC, "no-crc", false, "do not send a CRC-32C for the receiver to check")
	f.StringVar(&segment, "segment", "0", "largest work request a chunk is posted as (0 = the pacer's, 128 KiB)")
	f.StringVar(&pfcXoff, "pfc-xoff", "0", "the switches' PFC XOFF threshold the pacer's bursts stay under (0 = 1 MiB)")
	f.BoolVar(&noPacing, "no-pacing", false, "post segments as fast as the window allows (no software pacing)")
	addCommand(cmd)
}

type sendParams struct {
	to, file, name string
	size           units.Bytes
	seed           uint64
	secret         []byte
	devices        []string
	pool           units.Bytes
	qpsPerNIC      int
	qp             verbs.QPConfig
	crc            bool
	progress       bool
	busyPoll       time.Duration
	engine         multipath.Config
}

func runSend(ctx context.Context, p sendParams) (*SendSummary, error) {
	h, err := verbs.OpenHost(verbs.HostConfig{Devices: p.devices, PoolSize: p.pool})
	if err != nil {
		return nil, err
	}
	defer h.Close()
	buf, err := h.Alloc(p.size)
	if err != nil {
		return nil, err
	}
	defer buf.Free()
	if p.file != "" {
		f, err := os.Open(p.file)
		if err != nil {
			return nil, err
		}
		_, err = io.ReadFull(f, buf.Bytes())
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", p.file, err)
		}
	} else {
		fillPattern(buf.Bytes(), p.seed)
	}
	var sum uint32
	if p.crc {
		sum = crc32.Checksum(buf.Bytes(), castagnoli)
	}
	clock := vtime.NewMonotonic()
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	conn, err := h.Dial(dctx, p.to, verbs.DialConfig{
		Secret: p.secret, Send: buf, Size: p.size, ChunkSize: p.engine.ChunkSize, CRC: p.crc, CRC32C: sum,
		Name: p.name, QPsPerNIC: p.qpsPerNIC, QP: p.qp, Clock: clock,
	})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var done bool
	var doneErr error
	var doneAt vtime.Time
	snd, err := mptx.NewSender(conn, mptx.SenderConfig{Engine: p.engine, OnDone: func(_ multipath.TransferID, now vtime.Time, err error) {
		done, doneErr, doneAt = true, err, now
	}})
	if err != nil {
		return nil, err
	}
	const id = 1
	start := clock.Now()
	slot, plan, err := snd.Submit(start, multipath.TransferSpec{ID: id, Size: p.size})
	if err != nil {
		return nil, err
	}
	if err := conn.Announce(dctx, &verbs.Transfer{ID: id, Slot: uint32(slot), Size: uint64(p.size), ChunkSize: uint64(plan.ChunkSize),
		Count: uint32(plan.Count), CRC: p.crc, CRC32C: sum}); err != nil {
		return nil, err
	}
	eng := snd.Engine()
	bar := newBar(p.progress, p.size, "sending")
	acked := func() int64 {
		var t int64
		for i := 0; i < eng.NumPaths(); i++ {
			t += int64(eng.Stats(i).Bytes)
		}
		return min(t, int64(p.size))
	}
	start = clock.Now()
	err = runLocked(func() error {
		return mptx.Loop(ctx, mptx.LoopConfig{Clock: clock, Wake: conn.Notify(), BusyPoll: p.busyPoll, Done: func() bool { return done }},
			&progress{inner: snd, bar: bar, done: acked})
	})
	if bar != nil {
		_ = bar.Finish()
	}
	s := &SendSummary{Name: p.name, Bytes: int64(p.size), Chunks: plan.Count, ChunkSize: int64(plan.ChunkSize)}
	if p.crc {
		s.CRC32C = fmt.Sprintf("%08x", sum)
	}
	if done && doneErr == nil {
		d := doneAt.Sub(start)
		s.Seconds = d.Seconds()
		s.Gbps = float64(p.size) * 8 / d.Seconds() / 1e9
	}
	infos := conn.Paths()
	var total int64
	for i := 0; i < eng.NumPaths(); i++ {
		total += int64(eng.Stats(i).Bytes)
	}
	for i := 0; i < eng.NumPaths(); i++ {
		st := eng.Stats(i)
		ps := PathSummary{Path: i, Device: infos[i].Device, QPN: infos[i].QPN, SrcPort: infos[i].SrcPort, Bytes: int64(st.Bytes),
			Chunks: st.Chunks, Requeues: st.Requeues, State: st.State.String(), Reason: st.Reason,
			BaseRTT: infos[i].BaseRTT.String(), SRTT: st.SRTT.String(), MinRTT: st.MinRTT.String(), Probes: st.Probes}
		if total > 0 {
			ps.Share = float64(st.Bytes) / float64(total)
		}
		if perr := conn.PathErr(i); perr != nil {
			ps.Error = perr.Error()
		}
		s.Requeues += st.Requeues
		s.Paths = append(s.Paths, ps)
	}
	if err != nil {
		return s, fmt.Errorf("send loop: %w", err)
	}
	if doneErr != nil {
		return s, fmt.Errorf("transfer failed: %w", doneErr)
	}
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Minute) // the receiver may be checking a large CRC
	defer rcancel()
	rc, err := conn.AwaitReceipt(rctx)
	if err != nil {
		return s, fmt.Errorf("waiting for the receiver's receipt: %w", err)
	}
	s.ReceiverOK = rc.OK
	s.Receipt = rc.Message
	if !rc.OK {
		return s, fmt.Errorf("the receiver rejected the transfer: %s", rc.Message)
	}
	return s, nil
}

func printSendSummary(w io.Writer, s *SendSummary, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s)
		return
	}
	fmt.Fprintf(w, "sent %s: %v in %d chunks of %v, %.3f s, %.3f Gbit/s, %d requeues; receiver: %s\n",
		s.Name, units.Bytes(s.Bytes), s.Chunks, units.Bytes(s.ChunkSize), s.Seconds, s.Gbps, s.Requeues, s.Receipt)
	writePathTable(w, s.Paths, true)
	for _, p := range s.Paths {
		if p.Error != "" {
			fmt.Fprintf(w, "path %d: %s\n", p.Path, p.Error)
		}
	}
}

func writePathTable(w io.Writer, paths []PathSummary, sender bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if sender {
		fmt.Fprintln(tw, "path\tdevice\tqpn\tudp sport\tbytes\tshare\tchunks\trequeues\tstate\tbase rtt\tsrtt\tmin rtt\t")
	} else {
		fmt.Fprintln(tw, "path\tdevice\tqpn\tudp sport\tbytes\tshare\tchunks\t")
	}
	for _, p := range paths {
		if sender {
			state := p.State
			if p.Reason != "" {
				state += " (" + p.Reason + ")"
			}
			fmt.Fprintf(tw, "%d\t%s\t%#x\t%d\t%v\t%.1f%%\t%d\t%d\t%s\t%s\t%s\t%s\t\n", p.Path, p.Device, p.QPN, p.SrcPort,
				units.Bytes(p.Bytes), 100*p.Share, p.Chunks, p.Requeues, state, p.BaseRTT, p.SRTT, p.MinRTT)
		} else {
			fmt.Fprintf(tw, "%d\t%s\t%#x\t%d\t%v\t%.1f%%\t%d\t\n", p.Path, p.Device, p.QPN, p.SrcPort, units.Bytes(p.Bytes), 100*p.Share, p.Chunks)
		}
	}
	_ = tw.Flush()
}
