package main

// What send and recv share: their common flags, the shared secret, the
// interrupt context and exit statuses, the progress bar.
//
// Exit statuses of send and recv: 0 success; 1 a transfer (or the
// session) failed; 2 bad input (flags, arguments, unreadable files); 128+n
// when signal n stopped it (130 for Ctrl-C, 143 for SIGTERM): the
// transfers in progress are cancelled on both ends first.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/qp/verbs"
	"github.com/mptx-dev/mptx/units"
)

// xferFlags are the flags send and recv take whatever the transport.
type xferFlags struct {
	secretFile string
	transport  string
	timeout    time.Duration
	asJSON     bool
	noProgress bool
	trace      traceFlag
}

// verbsFlags are the flags of the verbs transport, which send and recv
// share: a session's over verbs (--transport verbs, or auto where it
// chooses verbs) and the direct path's (--transport verbs --direct).
type verbsFlags struct {
	direct   bool
	devices  string
	pool     string
	timeout  time.Duration
	retry    int
	rnrTimer time.Duration
	mtu      int
	busyPoll time.Duration
}

// verbsOnlyFlags are the flags that only verbs reads: a TCP session
// refuses them.
var verbsOnlyFlags = []string{"devices", "pool", "qp-timeout", "retry", "rnr-timer", "mtu", "busy-poll", "qps-per-nic", "direct"}

// directOnlyFlags are the verbs flags that only the direct path reads (a
// session sizes and registers its own memory, and its loop does not spin).
var directOnlyFlags = []string{"pool", "busy-poll"}

// registerXferFlags registers the flags that send and recv share on cmd:
// the one place for a flag both take (--trace FILE: a session's
// Config.Telemetry, both ends of each transfer in one trace).
func registerXferFlags(cmd *cobra.Command, x *xferFlags, v *verbsFlags) {
	fl := cmd.Flags()
	fl.StringVar(&x.secretFile, "secret-file", "", "file holding the shared secret (default: $MPTX_SECRET); at least 16 bytes, the same on both ends")
	fl.StringVar(&x.transport, "transport", "auto", "auto, tcp or verbs (see Transports below)")
	fl.DurationVar(&x.timeout, "timeout", 0, "session: bound on each control step: handshake, connecting the paths, a reply (default 10s)")
	fl.BoolVar(&x.asJSON, "json", false, "print the summary as JSON on stdout")
	fl.BoolVar(&x.noProgress, "no-progress", false, "no progress bar (there is none anyway when stderr is not a terminal)")
	x.trace.register(cmd)

	fl.BoolVar(&v.direct, "direct", false, "verbs: the direct RDMA path instead of a session: one tensor, recv exits after it (with --transport verbs)")
	fl.StringVar(&v.devices, "devices", "", "verbs: comma-separated RDMA devices to use, dev or dev:port (default: every ACTIVE RoCE port; see mptx devices)")
	fl.StringVar(&v.pool, "pool", "", "verbs --direct: size of the registered memory pool (default: enough for the tensor; a session sizes its own)")
	fl.DurationVar(&v.timeout, "qp-timeout", 0, "verbs: RC local ACK timeout (default 67ms: 4.096µs·2^14)")
	fl.IntVar(&v.retry, "retry", 0, "verbs: RC transport retry count 1..7 (default 7)")
	fl.DurationVar(&v.rnrTimer, "rnr-timer", 0, "verbs: minimum RNR NAK timer (default 0.64ms)")
	fl.IntVar(&v.mtu, "mtu", 0, "verbs: path MTU 256..4096 (default: the ports' active MTU)")
	fl.DurationVar(&v.busyPoll, "busy-poll", 0, "verbs --direct: how long the polling loop spins after activity before it sleeps on the completion channel (default 50µs); raise it where timers are coarse")
}

// transportsHelp closes the help of send and recv.
const transportsHelp = `
Transports (--transport; the two ends must agree, or say auto):
  tcp    a session over qp/tcp: RDMA-write semantics over one TCP connection
         per path; runs between any two Linux hosts (loopback included).
  verbs  a session over RC queue pairs (qp/verbs, libibverbs): --paths queue
         pairs spread over the --devices NICs (or --qps-per-nic on each).
         With --direct, the direct RDMA path instead: one tensor per run,
         recv exits after it (both ends must say --direct); session-only
         flags are refused.
  auto   a session on the best transport both ends have: verbs when both
         hosts have a usable RDMA device that reaches the other (proven by
         RTT probes on every path), TCP otherwise; the verbs flags apply
         when it is verbs.`

// oneSidedTransportsHelp closes the help of expose and pull, which run a
// session on every transport.
const oneSidedTransportsHelp = `
Transports (--transport; the two ends must agree, or say auto):
  tcp    a session over qp/tcp: READ requests and responses as frames on
         one TCP connection per path, bounds- and rights-checked by the
         exposing end; runs between any two Linux hosts (loopback included).
  verbs  a session over RC queue pairs (libibverbs): IBV_WR_RDMA_READ, each
         file a memory region per NIC with remote-read rights only.
  auto   verbs when both hosts have a usable RDMA device that reaches the
         other (proven by RTT probes on every path), TCP otherwise.`

func (x *xferFlags) secret() ([]byte, error) {
	var s []byte
	if x.secretFile != "" {
		b, err := os.ReadFile(x.secretFile)
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

// parseTransport checks --transport, and that the flags given suit it:
// verbs-only flags need verbs, and the names in sessionOnly need a
// session.
func (x *xferFlags) parseTransport(cmd *cobra.Command, v *verbsFlags, sessionOnly ...string) (mptx.Transport, error) {
	tr, err := mptx.ParseTransport(x.transport)
	if err != nil {
		return "", badInput("--transport %q: valid: auto, tcp, verbs", x.transport)
	}
	changed := func(name string) bool {
		f := cmd.Flags().Lookup(name)
		return f != nil && f.Changed
	}
	switch {
	case v.direct && tr != mptx.TransportVerbs:
		return "", badInput("--direct is a verbs path: it needs --transport verbs")
	case v.direct:
		for _, name := range sessionOnly {
			if changed(name) {
				return "", badInput("--%s needs a session (drop --direct); the direct verbs path has no such setting", name)
			}
		}
	case tr == mptx.TransportTCP:
		for _, name := range verbsOnlyFlags {
			if changed(name) {
				return "", badInput("--%s applies to verbs only (--transport verbs or auto; this run is a tcp session)", name)
			}
		}
	default:
		for _, name := range directOnlyFlags {
			if changed(name) {
				return "", badInput("--%s applies to the direct verbs path only (--transport verbs --direct)", name)
			}
		}
	}
	return tr, nil
}

// checkVerbs fails at once, with the device error and its remedy, where
// a verbs session could not open its NICs, rather than on every
// sender's set-up.
func (v *verbsFlags) checkVerbs() error {
	h, err := verbs.OpenHost(verbs.HostConfig{Devices: v.deviceList(), PoolSize: 4096, HugePages: verbs.HugeNever})
	if err != nil {
		return err
	}
	return h.Close()
}

// sessionVerbs is the verbs part of a session's Config from the flags
// (used when the session runs over verbs); qpsPerNIC 0 spreads the
// session's paths over the NICs.
func (v *verbsFlags) sessionVerbs(qpsPerNIC int) (mptx.VerbsConfig, error) {
	qc, err := v.qpConfig()
	if err != nil {
		return mptx.VerbsConfig{}, err
	}
	if qpsPerNIC < 0 || qpsPerNIC > verbs.MaxQPsPerNIC {
		return mptx.VerbsConfig{}, badInput("--qps-per-nic %d: valid 1..%d", qpsPerNIC, verbs.MaxQPsPerNIC)
	}
	return mptx.VerbsConfig{Devices: v.deviceList(), QPsPerNIC: qpsPerNIC, QP: qc}, nil
}

func (x *xferFlags) progress() bool {
	return !x.noProgress && !x.asJSON && term.IsTerminal(int(os.Stderr.Fd()))
}

func (v *verbsFlags) deviceList() []string {
	if v.devices == "" {
		return nil
	}
	return strings.Split(v.devices, ",")
}

func (v *verbsFlags) qpConfig() (verbs.QPConfig, error) {
	c := verbs.QPConfig{Timeout: v.timeout, RetryCount: v.retry, MinRNRTimer: v.rnrTimer, MTU: units.Bytes(v.mtu)}
	if v.retry < 0 || v.retry > 7 {
		return c, badInput("--retry %d: valid 1..7", v.retry)
	}
	return c, nil
}

func (v *verbsFlags) poolSize(need units.Bytes) (units.Bytes, error) {
	if v.pool == "" {
		return need + 4*units.MiB, nil
	}
	p, err := units.ParseBytes(v.pool)
	if err != nil || p <= 0 {
		return 0, badInput("--pool %q: want a size such as 256MiB", v.pool)
	}
	if p < need {
		return 0, badInput("--pool %v is smaller than the %v needed", p, need)
	}
	return p, nil
}

// interrupted is the cause of a run stopped by a signal; main exits with
// 128 + the signal's number.
type interrupted struct{ sig os.Signal }

func (i interrupted) Error() string { return "interrupted (" + i.sig.String() + ")" }

func (i interrupted) exitCode() int {
	if s, ok := i.sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 130
}

// signalContext is cancelled, with an interrupted cause, by the first
// SIGINT or SIGTERM; a second one kills the process at once (the
// default disposition is back by then). stop releases the signals.
func signalContext() (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			signal.Stop(ch)
			cancel(interrupted{s})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(context.Canceled)
	}
}

// stopped returns ctx's interrupted cause, if a signal stopped the run.
func stopped(ctx context.Context) error {
	var i interrupted
	if errors.As(context.Cause(ctx), &i) {
		return i
	}
	return nil
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

// newBar returns a progress bar on stderr, or nil when it is disabled.
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

// gbps is size over d in Gbit/s (0 for no time).
func gbps(size units.Bytes, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(size) * 8 / d.Seconds() / 1e9
}

// oneLine flattens a multi-line error for a log line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}

// humanBytes renders b for a summary: "5000 B", "64.00 MiB", "1.00 GiB".
func humanBytes(b units.Bytes) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	v, i := float64(b)/unit, 0
	for v >= unit && i < 3 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.2f %ciB", v, "KMGT"[i])
}

// displayName renders a tensor name for a terminal: as is when every rune
// is printable, else quoted with escapes (a name comes from the peer, and
// one with control characters could drive the terminal).
func displayName(name string) string {
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return strconv.Quote(name)
		}
	}
	return name
}
