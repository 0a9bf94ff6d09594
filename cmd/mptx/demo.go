package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/mem"
	"github.com/mptx-dev/mptx/telemetry"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// Demo limits: the demo holds the tensor twice in memory (sent and
// received, to verify every byte) and simulates every chunk, so it bounds
// the size, the path rates and the ideal (aggregate-rate) completion time.
const (
	demoMaxSize  = units.GiB
	demoMinRate  = units.Mbps
	demoMaxRate  = 10 * units.Tbps
	demoMaxIdeal = 10 * time.Second // of virtual time
)

func init() { addCommand(demoCmd()) }

func demoCmd() *cobra.Command {
	var (
		size    string
		rates   string
		ccName  string
		policy  string
		chunk   string
		failAt  time.Duration
		failIdx int
		trace   traceFlag
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Ship one tensor over in-memory paths in virtual time and report per-path throughput",
		Long: `demo runs the real multipath engine, congestion control and pacing over the
in-memory backend (each path a FIFO server with a rate and a delay) in virtual
time, ships one tensor, verifies every byte, and prints the completion time and
what each path carried. It needs no hardware.

With --trace FILE (or the standard OTEL_* variables: OTEL_TRACES_EXPORTER=file
mptx demo) both ends are traced in virtual time, in one trace per transfer:
the sender's mptx.transfer and mptx.chunk spans, and the receiver's
mptx.receive and mptx.recv.chunk spans joined to them through W3C trace
context, as a session carries it on its control channel; metrics too.

Limits: --size at most 1GiB (the tensor is held twice, to verify it), path
rates 1Mbps..10Tbps, and the ideal completion (size over the summed rates) at
most 10s of virtual time.`,
		Example: `  mptx demo
  mptx demo --rates 100G,100G,25G --size 1GiB --cc swift
  mptx demo --fail-path 1 --fail-at 5ms
  mptx demo --trace demo.jsonl && mptx trace analyze demo.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := units.ParseBytes(size)
			if err != nil || n <= 0 || n > demoMaxSize {
				return badInput("--size %q: want a size in 1B..%v such as 256MiB (the demo holds the tensor twice in memory)", size, demoMaxSize)
			}
			cs, err := units.ParseBytes(chunk)
			if err != nil {
				return badInput("--chunk %q: %v", chunk, err)
			}
			pol, err := multipath.ParsePolicy(policy)
			if err != nil {
				return badInput("--policy: %v", err)
			}
			var paths []mem.PathConfig
			var sum units.BitRate
			for i, f := range strings.Split(rates, ",") {
				r, err := units.ParseBitRate(f)
				if err != nil || r < demoMinRate || r > demoMaxRate {
					return badInput("--rates: path %d rate %q: want a rate in %v..%v such as 40G", i, f, demoMinRate, demoMaxRate)
				}
				paths = append(paths, mem.PathConfig{Rate: r, Delay: 5 * time.Microsecond, NIC: i})
				sum += r
			}
			if len(paths) > multipath.MaxPaths {
				return badInput("--rates: %d paths: want 1..%d", len(paths), multipath.MaxPaths)
			}
			if ideal := sum.TxTime(n); ideal > demoMaxIdeal {
				return badInput("--size %v over --rates %s: the ideal completion %v exceeds the demo's %v of virtual time; raise the rates or shrink the size", n, rates, ideal.Round(time.Millisecond), demoMaxIdeal)
			}
			if failAt < 0 {
				return badInput("--fail-at %v: want a virtual time > 0 (or 0: never)", failAt)
			}
			if failAt > 0 {
				if failIdx < 0 || failIdx >= len(paths) {
					return badInput("--fail-path %d: valid 0..%d", failIdx, len(paths)-1)
				}
				paths[failIdx].FailAt = vtime.Epoch.Add(failAt)
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			tel, err := trace.start(ctx, "mptx-demo", true)
			if err != nil {
				return err
			}
			err = runDemo(cmd.OutOrStdout(), paths, n, cs, ccName, pol, tel)
			if terr := finishTelemetry(ctx, tel, cmd.ErrOrStderr()); err == nil {
				err = terr
			}
			return err
		},
	}
	cmd.Flags().StringVar(&size, "size", "256MiB", "tensor size")
	cmd.Flags().StringVar(&rates, "rates", "40G,20G,10G,10G", "comma-separated path rates")
	cmd.Flags().StringVar(&ccName, "cc", "dcqcn", "congestion control (dcqcn, timely, swift, hpcc, fixed)")
	cmd.Flags().StringVar(&policy, "policy", "congestion-aware", "path policy (congestion-aware, round-robin, random, min-rtt, p2c)")
	cmd.Flags().StringVar(&chunk, "chunk", "0", "chunk size (0 = automatic, 2-4 MiB)")
	cmd.Flags().DurationVar(&failAt, "fail-at", 0, "fail --fail-path at this virtual time (0 = never)")
	cmd.Flags().IntVar(&failIdx, "fail-path", 1, "index of the path to fail")
	trace.register(cmd)
	return cmd
}

func runDemo(w io.Writer, paths []mem.PathConfig, size, chunkSize units.Bytes, ccName string, pol multipath.Policy, tel *telemetry.Telemetry) error {
	send := make([]byte, size)
	for i := range send {
		send[i] = byte(i*131 + i>>12)
	}
	recv := make([]byte, size)
	net, err := mem.New(mem.Config{Paths: paths, SendRegion: send, RecvRegion: recv})
	if err != nil {
		return err
	}
	start := net.Now()
	wall := time.Now()
	var sentErr, recvErr error
	var sentAt vtime.Time
	sent, got := false, false
	onSent := func(_ multipath.TransferID, now vtime.Time, err error) { sent, sentErr, sentAt = true, err, now }
	onGot := func(_ multipath.TransferID, _ vtime.Time, err error) { got, recvErr = true, err }

	// Telemetry (--trace, OTEL_*): both ends, virtual time stamped from
	// the wall clock at the start.
	var (
		srec *telemetry.Recorder
		rrec *telemetry.ReceiveRecorder
		tap  *telemetry.ReceiverTap
		rx   qp.Receiver = net.Receiver()
	)
	engine := multipath.Config{CC: ccName, Policy: pol, ChunkSize: chunkSize}
	rcfg := mptx.ReceiverConfig{OnDone: onGot}
	if tel != nil {
		epoch := wall.Add(-time.Duration(start))
		attrs := make([]telemetry.PathAttr, len(paths))
		for i, pi := range net.Conn().Paths() {
			attrs[i] = telemetry.PathAttr{Device: pi.Device, QPN: pi.QPN, NIC: fmt.Sprintf("nic%d", pi.NIC)}
		}
		srec, err = telemetry.NewRecorder(telemetry.Config{TracerProvider: tel.TracerProvider, MeterProvider: tel.MeterProvider,
			Wall: telemetry.FixedEpoch(epoch), CC: ccName, Backend: "mem", Peer: "demo-receiver", Paths: attrs, Synchronous: true})
		if err != nil {
			return err
		}
		rrec, err = telemetry.NewReceiveRecorder(telemetry.ReceiveConfig{TracerProvider: tel.TracerProvider, MeterProvider: tel.MeterProvider,
			Wall: telemetry.FixedEpoch(epoch), Backend: "mem", Peer: "demo-sender", Paths: attrs, Synchronous: true})
		if err != nil {
			return err
		}
		tel.UseVirtualClock(wall, srec.WallNow)
		engine.Recorder = srec
		tap = telemetry.NewReceiverTap(net.Receiver(), rrec, net)
		rx = tap
		rcfg = mptx.ReceiverConfig{OnChunk: tap.OnChunk(nil), OnDone: tap.OnDone(onGot)}
	}
	snd, err := mptx.NewSender(net.Conn(), mptx.SenderConfig{Engine: engine, OnDone: onSent})
	if err != nil {
		return usageError{err}
	}
	rcv, err := mptx.NewReceiver(rx, rcfg)
	if err != nil {
		return err
	}
	const id = 1
	var tc []byte
	if srec != nil {
		tc = srec.BeginTransfer(context.Background(), start, id, "demo")
	}
	tag, plan, err := snd.Submit(start, multipath.TransferSpec{ID: id, Size: size})
	if err != nil {
		if srec != nil {
			srec.CancelTransfer(start, id, err.Error())
		}
		return usageError{err}
	}
	// The control channel: the receiver learns the plan and the trace.
	if err := rcv.Expect(tag, id, plan, 0); err != nil {
		return err
	}
	if tap != nil {
		if err := tap.Expect(tag, id, plan, tc); err != nil {
			return err
		}
	}
	next := snd.Step(start)
	for !(sent && (got || sentErr != nil)) {
		t := vtime.Earliest(net.Next(), next)
		if t == 0 {
			return fmt.Errorf("demo: transfer stalled at %v", net.Now())
		}
		net.AdvanceTo(t)
		rcv.Step(net.Now())
		next = snd.Step(net.Now())
	}
	if srec != nil {
		srec.Close(net.Now())
		rrec.Close(net.Now())
	}
	if sentErr != nil {
		return sentErr
	}
	if recvErr != nil {
		return recvErr
	}
	for i := range send {
		if send[i] != recv[i] {
			return fmt.Errorf("demo: byte %d differs after the transfer", i)
		}
	}
	el := sentAt.Sub(start)
	var line units.BitRate
	for _, p := range paths {
		line += p.Rate
	}
	fmt.Fprintf(w, "mptx demo: %v tensor, %d chunks of %v, %d paths, cc %s, policy %v (virtual time; computed in %v)\n",
		size, plan.Count, plan.ChunkSize, len(paths), ccName, pol, time.Since(wall).Round(time.Millisecond))
	fmt.Fprintf(w, "completion %v, goodput %v (aggregate path rate %v, ideal %v); every byte verified\n\n",
		el.Round(time.Microsecond), units.RateOf(size, el), line, line.TxTime(size).Round(time.Microsecond))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\trate\tstate\tbytes\tshare\tthroughput\tchunks\trequeues\tsrtt\t")
	eng := snd.Engine()
	for i, p := range paths {
		st := eng.Stats(i)
		b := net.PathBytes(i)
		state := st.State.String()
		if st.Reason != "" {
			state += " (" + st.Reason + ")"
		}
		fmt.Fprintf(tw, "%d\t%v\t%s\t%v\t%.1f%%\t%v\t%d\t%d\t%v\t\n", i, p.Rate, state, b,
			100*float64(b)/float64(size), units.RateOf(b, el), st.Chunks, st.Requeues, st.SRTT.Round(100*time.Nanosecond))
	}
	return tw.Flush()
}
