package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp/verbs"
	"github.com/mptx-dev/mptx/telemetry"
	"github.com/mptx-dev/mptx/units"
)

// engineFlags configure the sender's multipath engine, on every transport.
type engineFlags struct {
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
}

func (e *engineFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&e.chunkSize, "chunk", "0", "chunk size (0 = automatic, 2-4 MiB)")
	f.StringVar(&e.ccName, "cc", "", "congestion control: dcqcn, timely, swift, hpcc, fixed (default: the transport's; dcqcn on verbs, the session's TCP default on tcp)")
	f.StringVar(&e.policy, "policy", "congestion-aware", "path policy: "+strings.Join(multipath.PolicyNames(), ", "))
	f.StringVar(&e.inflight, "max-inflight", "0", "cap on each path's bytes in flight (0 = two bandwidth-delay products from the measured RTT)")
	f.DurationVar(&e.stall, "stall-timeout", 0, "floor of the per-path stall timeout (0 = 500ms on TCP, the engine's 10ms on verbs); raise it on slow links")
	f.DurationVar(&e.probeEvery, "probe-interval", 0, "probe idle paths' RTT this often with zero-length writes (0 = only when needed)")
	f.BoolVar(&e.noCRC, "no-crc", false, "do not send a CRC-32C for the receiver to check")
	f.StringVar(&e.segment, "segment", "0", "largest work request a chunk is posted as (0 = the pacer's, 128 KiB)")
	f.StringVar(&e.pfcXoff, "pfc-xoff", "0", "the switches' PFC XOFF threshold the pacer's bursts stay under (0 = 1 MiB)")
	f.BoolVar(&e.noPacing, "no-pacing", false, "post segments as fast as the window allows (no software pacing)")
}

func (e *engineFlags) config() (multipath.Config, error) {
	cs, err := units.ParseBytes(e.chunkSize)
	if err != nil {
		return multipath.Config{}, badInput("--chunk %q: %v", e.chunkSize, err)
	}
	infl, err := units.ParseBytes(e.inflight)
	if err != nil {
		return multipath.Config{}, badInput("--max-inflight %q: %v", e.inflight, err)
	}
	seg, err := units.ParseBytes(e.segment)
	if err != nil {
		return multipath.Config{}, badInput("--segment %q: %v", e.segment, err)
	}
	xoff, err := units.ParseBytes(e.pfcXoff)
	if err != nil {
		return multipath.Config{}, badInput("--pfc-xoff %q: %v", e.pfcXoff, err)
	}
	pol, err := multipath.ParsePolicy(e.policy)
	if err != nil {
		return multipath.Config{}, badInput("--policy: %v", err)
	}
	if e.stall < 0 || e.probeEvery < 0 {
		return multipath.Config{}, badInput("--stall-timeout %v, --probe-interval %v: want durations >= 0", e.stall, e.probeEvery)
	}
	return multipath.Config{CC: e.ccName, Policy: pol, ChunkSize: cs, MaxInFlight: infl, MinTimeout: e.stall, ProbeInterval: e.probeEvery,
		Segment: seg, Pacing: multipath.PacingConfig{PFCXoff: xoff, Disabled: e.noPacing}}, nil
}

// parsePathSpec parses one --path: comma-separated key=value pairs, keys
// local (source IP), remote (the receiver's IP for this path), dev
// (SO_BINDTODEVICE interface), rate (line rate, e.g. 10Gbps) and nic
// (paths with the same nic share a port pacer).
func parsePathSpec(spec string) (mptx.TCPPath, error) {
	var p mptx.TCPPath
	for _, kv := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || v == "" {
			return p, fmt.Errorf("%q: want key=value pairs (local, remote, dev, rate, nic)", kv)
		}
		switch k {
		case "local", "remote":
			if _, err := netip.ParseAddr(v); err != nil {
				return p, fmt.Errorf("%s=%q: want an IP address", k, v)
			}
			if k == "local" {
				p.Local = v
			} else {
				p.Remote = v
			}
		case "dev":
			p.Interface = v
		case "rate":
			r, err := units.ParseBitRate(v)
			if err != nil || r <= 0 {
				return p, fmt.Errorf("rate=%q: want a positive rate such as 10Gbps", v)
			}
			p.LineRate = r
		case "nic":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n >= multipath.MaxPaths {
				return p, fmt.Errorf("nic=%q: valid 0..%d", v, multipath.MaxPaths-1)
			}
			p.NIC = n
		default:
			return p, fmt.Errorf("unknown key %q (valid: local, remote, dev, rate, nic)", k)
		}
	}
	return p, nil
}

func init() {
	var (
		xf         xferFlags
		vf         verbsFlags
		ef         engineFlags
		to         string
		file       string
		size       string
		seed       uint64
		name       string
		paths      int
		pathSpecs  []string
		sendBuffer string
		qpsPerNIC  int
	)
	cmd := &cobra.Command{
		Use:   "send [flags] ADDR [FILE...]",
		Short: "Send files (or a generated tensor) to mptx recv over TCP or RDMA",
		Long: `send ships each FILE as one tensor, named after the file's base name, to the
` + "`mptx recv`" + ` listening on ADDR (HOST:PORT); without FILEs it sends one generated
tensor of --size bytes from --seed. Both ends prove the shared secret to each
other (HMAC challenge-response) before anything else; a receiver with another
secret refuses us, and send says so in one line.

Over a session (every transport but --direct) the tensors are pipelined
through the session's send buffer (--send-buffer; a tensor larger than it
cannot be sent). Over verbs the session's --paths RC queue pairs are spread
over the --devices NICs (--qps-per-nic on each instead). Over TCP they are
--paths TCP connections, or one per --path, e.g. one per NIC:
  --path local=10.0.1.1,remote=10.0.1.2 --path local=10.0.2.1,remote=10.0.2.2
(keys: local source IP, remote receiver IP, dev interface, rate line rate, nic).
The receiver's data listener binds the host it listens on (mptx recv
--listen), so with --listen 0.0.0.0:PORT every remote= of the receiver's NICs
reaches it; with a specific IP, remotes must be that IP (route it per NIC and
bind each path with local= and dev=, as the netns test in cmd/mptx does).
A path that fails or stalls is taken out of use and its chunks go over the
others; it is reset (over TCP a new connection, over verbs its queue pairs
at both ends) and rejoins when it answers again.

When it returns: each tensor is done when the receiver has every byte in place
and has checked its CRC-32C (unless --no-crc), and said so. Ctrl-C cancels
the transfers on both ends. The summary gives throughput, each path's bytes
and share, requeues and resets. Exit status: 0 every tensor delivered; 1 a
transfer or the session failed (a wrong secret included); 2 bad input; 130
interrupted (Ctrl-C).

Soft-RoCE (rdma_rxe), with --transport verbs, especially in a VM: rxe's cost is
per work request and its ACKs lag under load, so post whole chunks (--chunk
1MiB --segment 1MiB --pfc-xoff 16MiB), keep more in flight (--max-inflight
16MiB), raise the ACK timeout (--qp-timeout 500ms) and the stall timeout
(--stall-timeout 3s), and, with --direct, keep --busy-poll short. test/rxe
uses these.
` + transportsHelp,
		Example: `  MPTX_SECRET=$(cat /etc/mptx.secret) mptx send 10.0.0.2:7471 weights.bin optimizer.bin
  mptx send --secret-file s.key --transport tcp --paths 8 host:7471 model.safetensors
  mptx send --secret-file s.key host:7471 --size 1GiB --seed 7
  mptx send --transport verbs --secret-file s.key --devices mlx5_0,mlx5_1 --paths 8 host:7471 kv/*.bin
  mptx send --transport verbs --direct --to host:7471 --size 1GiB --devices mlx5_0,mlx5_1 --qps-per-nic 4 --secret-file s.key`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tr, err := xf.parseTransport(cmd, &vf, "paths", "path", "send-buffer")
			if err != nil {
				return err
			}
			if tr == mptx.TransportVerbs && !vf.direct && cmd.Flags().Changed("path") {
				return badInput("--path describes TCP paths; a verbs session takes --devices and --paths (or --qps-per-nic)")
			}
			if to == "" {
				if len(args) == 0 {
					return badInput("the receiver's address is required: mptx send HOST:PORT [FILE...] (or --to HOST:PORT)")
				}
				to, args = args[0], args[1:]
			}
			if _, _, err := net.SplitHostPort(to); err != nil {
				return badInput("receiver address %q: want HOST:PORT (%v)", to, err)
			}
			files := args
			if file != "" {
				files = append([]string{file}, files...)
			}
			tensors, err := tensorSources(files, size, seed, name)
			if err != nil {
				return err
			}
			secret, err := xf.secret()
			if err != nil {
				return err
			}
			ecfg, err := ef.config()
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			if vf.direct {
				return sendVerbs(cmd, ctx, &xf, &vf, ecfg, to, tensors, qpsPerNIC, !ef.noCRC, secret)
			}
			perNIC := 0
			if cmd.Flags().Changed("qps-per-nic") {
				perNIC = qpsPerNIC
			}
			vcfg, err := vf.sessionVerbs(perNIC)
			if err != nil {
				return err
			}
			if paths < 1 || paths > multipath.MaxPaths {
				return badInput("--paths %d: valid 1..%d", paths, multipath.MaxPaths)
			}
			var tcpPaths []mptx.TCPPath
			for i, s := range pathSpecs {
				p, err := parsePathSpec(s)
				if err != nil {
					return badInput("--path #%d: %v", i+1, err)
				}
				tcpPaths = append(tcpPaths, p)
			}
			if len(tcpPaths) > multipath.MaxPaths {
				return badInput("%d --path flags: at most %d", len(tcpPaths), multipath.MaxPaths)
			}
			buf, err := sendBufferSize(sendBuffer, tensors)
			if err != nil {
				return err
			}
			// after every usage check: bad input is exit 2 with or without a device
			if tr == mptx.TransportVerbs {
				if err := vf.checkVerbs(); err != nil {
					return err
				}
			}
			cfg := mptx.Config{Secret: secret, Transport: tr, Paths: paths, TCP: mptx.TCPConfig{Paths: tcpPaths}, Verbs: vcfg, Engine: ecfg,
				SendBuffer: buf, NoChecksum: ef.noCRC, Timeout: xf.timeout}
			tel, err := xf.trace.start(ctx, "mptx-send", false)
			if err != nil {
				return err
			}
			if tel != nil {
				cfg.Telemetry = telemetry.Sessions{T: tel}
			}
			sum, err := runSendSession(ctx, sessionSendParams{addr: to, tensors: tensors, cfg: cfg, via: pathSpecs, progress: xf.progress()})
			if sum != nil {
				printSessionSendSummary(cmd.OutOrStdout(), sum, xf.asJSON)
			}
			if ferr := finishTelemetry(context.WithoutCancel(ctx), tel, cmd.ErrOrStderr()); ferr != nil && err == nil {
				err = ferr
			}
			return err
		},
	}
	registerXferFlags(cmd, &xf, &vf)
	ef.register(cmd)
	f := cmd.Flags()
	f.StringVar(&to, "to", "", "receiver address HOST:PORT (instead of the ADDR argument)")
	f.StringVar(&file, "file", "", "a file to send (as a FILE argument)")
	f.StringVar(&size, "size", "64MiB", "size of the generated tensor (without FILEs)")
	f.Uint64Var(&seed, "seed", 1, "seed of the generated tensor")
	f.StringVar(&name, "name", "", "the tensor's name, for one tensor (default: the file's base name; generated-seedN for a generated one)")
	f.IntVar(&paths, "paths", mptx.DefaultPaths, "session: TCP paths (connections), when no --path is given")
	f.StringArrayVar(&pathSpecs, "path", nil, "session: one TCP path, local=IP,remote=IP,dev=IFACE,rate=RATE,nic=N (any subset; repeat per path)")
	f.StringVar(&sendBuffer, "send-buffer", "", "session: the send buffer tensors are staged in (default: the largest tensor, at least min(all tensors, 256MiB))")
	f.IntVar(&qpsPerNIC, "qps-per-nic", 1, "verbs: RC queue pairs (paths) per NIC (default: a session spreads --paths over the NICs; 1 with --direct)")
	addCommand(cmd)
}

// tensorSources checks the files (or the generated tensor's size) and
// names the tensors.
func tensorSources(files []string, size string, seed uint64, name string) ([]tensorSource, error) {
	if name != "" && len(files) > 1 {
		return nil, badInput("--name names one tensor; %d files were given (each is named after its base name)", len(files))
	}
	if len(name) > mptx.MaxNameLen {
		return nil, badInput("--name is %d bytes; valid up to %d", len(name), mptx.MaxNameLen)
	}
	if len(files) == 0 {
		n, err := units.ParseBytes(size)
		if err != nil || n <= 0 {
			return nil, badInput("--size %q: want a positive size such as 64MiB", size)
		}
		if name == "" {
			name = fmt.Sprintf("generated-seed%d", seed)
		}
		return []tensorSource{{name: name, size: n, seed: seed}}, nil
	}
	var out []tensorSource
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			return nil, badInput("%v", err)
		}
		if !st.Mode().IsRegular() {
			return nil, badInput("%s is not a regular file", f)
		}
		if st.Size() == 0 {
			return nil, badInput("%s is empty (a tensor has at least 1 byte)", f)
		}
		n := name
		if n == "" {
			n = filepath.Base(f)
		}
		out = append(out, tensorSource{name: n, file: f, size: units.Bytes(st.Size())})
	}
	return out, nil
}

// sendBufferSize is --send-buffer, or by default the largest tensor but at
// least min(all tensors, mptx.DefaultSendBuffer): room for one tensor, and
// for several small ones to be in flight at once.
func sendBufferSize(flag string, tensors []tensorSource) (units.Bytes, error) {
	var largest, total units.Bytes
	for _, t := range tensors {
		largest = max(largest, t.size)
		total += t.size
	}
	if flag == "" {
		return max(largest, min(total, mptx.DefaultSendBuffer)), nil
	}
	b, err := units.ParseBytes(flag)
	if err != nil || b <= 0 {
		return 0, badInput("--send-buffer %q: want a size such as 256MiB", flag)
	}
	if b < largest {
		return 0, badInput("--send-buffer %v is smaller than the largest tensor (%v)", b, largest)
	}
	return b, nil
}

// sendVerbs runs the direct verbs path: one tensor.
func sendVerbs(cmd *cobra.Command, ctx context.Context, xf *xferFlags, vf *verbsFlags, ecfg multipath.Config, to string, tensors []tensorSource,
	qpsPerNIC int, crc bool, secret []byte) error {
	if len(tensors) != 1 {
		return badInput("--direct sends one tensor per run (%d given); a session (without --direct) takes several", len(tensors))
	}
	if qpsPerNIC < 1 || qpsPerNIC > verbs.MaxQPsPerNIC {
		return badInput("--qps-per-nic %d: valid 1..%d", qpsPerNIC, verbs.MaxQPsPerNIC)
	}
	qc, err := vf.qpConfig()
	if err != nil {
		return err
	}
	t := tensors[0]
	pool, err := vf.poolSize(t.size)
	if err != nil {
		return err
	}
	sum, err := runSendVerbs(ctx, verbsSendParams{
		to: to, file: t.file, name: t.name, size: t.size, seed: t.seed, secret: secret, devices: vf.deviceList(),
		pool: pool, qpsPerNIC: qpsPerNIC, qp: qc, crc: crc, progress: xf.progress(), busyPoll: vf.busyPoll, engine: ecfg,
	})
	if sum != nil {
		printSendSummary(cmd.OutOrStdout(), sum, xf.asJSON)
	}
	if cause := stopped(ctx); cause != nil {
		return cause
	}
	return err
}
