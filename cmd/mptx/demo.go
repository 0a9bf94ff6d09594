package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp/mem"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

func init() {
	var (
		size    string
		rates   string
		ccName  string
		policy  string
		chunk   string
		failAt  time.Duration
		failIdx int
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Ship one tensor over in-memory paths in virtual time and report per-path throughput",
		Long: `demo runs the real multipath engine, congestion control and pacing over the
in-memory backend (each path a FIFO server with a rate and a delay) in virtual
time, ships one tensor, verifies every byte, and prints the completion time and
what each path carried. It needs no hardware.`,
		Example: `  mptx demo
  mptx demo --rates 100G,100G,25G --size 1GiB --cc swift
  mptx demo --fail-path 1 --fail-at 5ms`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := units.ParseBytes(size)
			if err != nil || n <= 0 {
				return badInput("--size %q: want a positive size such as 256MiB", size)
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
			for i, f := range strings.Split(rates, ",") {
				r, err := units.ParseBitRate(f)
				if err != nil || r <= 0 {
					return badInput("--rates: path %d rate %q: want a rate such as 40G", i, f)
				}
				paths = append(paths, mem.PathConfig{Rate: r, Delay: 5 * time.Microsecond, NIC: i})
			}
			if failAt > 0 {
				if failIdx < 0 || failIdx >= len(paths) {
					return badInput("--fail-path %d: valid 0..%d", failIdx, len(paths)-1)
				}
				paths[failIdx].FailAt = vtime.Epoch.Add(failAt)
			}
			return runDemo(cmd.OutOrStdout(), paths, n, cs, ccName, pol)
		},
	}
	cmd.Flags().StringVar(&size, "size", "256MiB", "tensor size")
	cmd.Flags().StringVar(&rates, "rates", "40G,20G,10G,10G", "comma-separated path rates")
	cmd.Flags().StringVar(&ccName, "cc", "dcqcn", "congestion control (dcqcn, timely, swift, hpcc, fixed)")
	cmd.Flags().StringVar(&policy, "policy", "congestion-aware", "path policy (congestion-aware, round-robin, random, min-rtt, p2c)")
	cmd.Flags().StringVar(&chunk, "chunk", "0", "chunk size (0 = automatic, 2-4 MiB)")
	cmd.Flags().DurationVar(&failAt, "fail-at", 0, "fail --fail-path at this virtual time (0 = never)")
	cmd.Flags().IntVar(&failIdx, "fail-path", 1, "index of the path to fail")
	addCommand(cmd)
}

func runDemo(w io.Writer, paths []mem.PathConfig, size, chunkSize units.Bytes, ccName string, pol multipath.Policy) error {
	send := make([]byte, size)
	for i := range send {
		send[i] = byte(i*131 + i>>12)
	}
	recv := make([]byte, size)
	net, err := mem.New(mem.Config{Paths: paths, SendRegion: send, RecvRegion: recv})
	if err != nil {
		return err
	}
	var sentErr, recvErr error
	var sentAt vtime.Time
	sent, got := false, false
	snd, err := mptx.NewSender(net.Conn(), mptx.SenderConfig{
		Engine: multipath.Config{CC: ccName, Policy: pol, ChunkSize: chunkSize},
		OnDone: func(_ multipath.TransferID, now vtime.Time, err error) { sent, sentErr, sentAt = true, err, now },
	})
	if err != nil {
		return usageError{err}
	}
	rcv, err := mptx.NewReceiver(net.Receiver(), mptx.ReceiverConfig{
		OnDone: func(_ multipath.TransferID, _ vtime.Time, err error) { got, recvErr = true, err },
	})
	if err != nil {
		return err
	}
	start := net.Now()
	wall := time.Now()
	slot, plan, err := snd.Submit(start, multipath.TransferSpec{ID: 1, Size: size})
	if err != nil {
		return usageError{err}
	}
	if err := rcv.Expect(slot, 1, plan, 0); err != nil {
		return err
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
