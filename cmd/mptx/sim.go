package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	mptxchunk "github.com/mptx-dev/mptx/chunk"
	"github.com/mptx-dev/mptx/experiments"
	"github.com/mptx-dev/mptx/experiments/interop"
	"github.com/mptx-dev/mptx/units"
)

func simCmd() *cobra.Command {
	var (
		io                        experiments.InteropOptions
		ccName, pathPolicy, chunk string
		paths                     int
		pacing                    bool
		seed                      int64
		fctOut, compare, jsonOut  string
		stop                      time.Duration
		trace                     traceFlag
	)
	cmd := &cobra.Command{
		Use:   "sim [SPEC]",
		Short: "Simulate one scenario once (a spec, or HPCC ns-3 / htsim files) and print its metrics",
		Long: `sim runs a single simulation: one policy point and one seed of SPEC (its first
matrix point unless flags choose another), or a scenario given as another
simulator's files:

  --ns3-topology T --ns3-flows F   HPCC ns-3 topology.txt and flow.txt
  --ns3-config C                   HPCC ns-3 config.txt: the NIC's congestion
                                   control (CC_MODE 1 DCQCN, 3 HPCC) and its
                                   parameters, payload, ACKs, switch buffer and
                                   ECN maps; its TOPOLOGY_FILE and FLOW_FILE
                                   unless the flags above are given
  --htsim M                        an htsim connection matrix, on the smallest
                                   fat-tree with enough hosts

A scenario in another simulator's files runs with its framing: ns-3's
1000-byte payload behind 48 bytes of headers (or the config's), htsim's 4000
behind 64. The command exits with status 1 when a tensor flow does not
complete.

--fct-out writes HPCC's fct.txt (sip dip sport dport size start_ns fct_ns
standalone_fct_ns, one line per completed flow) so existing analysis scripts
work unchanged; --compare puts another simulator's fct.txt for the same flows
side by side with ours.`,
		Example: `  mptx sim experiments/suites/incast/incast.yaml --cc hpcc --pacing=false
  mptx sim --ns3-topology topology.txt --ns3-flows flow.txt --fct-out fct.txt
  mptx sim --ns3-topology topology.txt --ns3-flows flow.txt --cc dcqcn --compare ns3-fct.txt
  mptx sim --ns3-config mix/config.txt --fct-out fct.txt
  mptx sim --htsim perm_16n_16c_2MB.cm --cc swift --paths 4`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeSuites,
		RunE: func(cmd *cobra.Command, args []string) error {
			interopGiven := io.NS3Topology != "" || io.NS3Flows != "" || io.NS3Config != "" || io.Htsim != ""
			if len(args) == 1 && interopGiven {
				return badInput("give a SPEC or --ns3-*/--htsim files, not both")
			}
			if stop < 0 {
				return badInput("--stop %v: want a positive duration", stop)
			}
			var spec *experiments.Spec
			var err error
			if len(args) == 1 {
				var specs []*experiments.Spec
				if _, specs, err = experiments.LoadSpecs(args); err == nil && len(specs) != 1 {
					return badInput("%s holds %d scenarios; sim runs one (use mptx exp run for a suite)", args[0], len(specs))
				}
				if err == nil {
					spec = specs[0]
				}
			} else {
				io.Stop = stop
				var notes []string
				spec, notes, err = experiments.InteropScenario(io)
				for _, n := range notes {
					fmt.Fprintln(cmd.ErrOrStderr(), "mptx: note:", n)
				}
			}
			if err != nil {
				return specError(err)
			}
			if stop > 0 {
				spec.Stop.Time = experiments.Duration(stop)
			}
			pol := spec.Matrix.Policies()[0]
			f := cmd.Flags()
			if f.Changed("cc") {
				if !slices.Contains(experiments.CCNames, ccName) {
					return badInput("--cc %q: allowed: %s", ccName, strings.Join(experiments.CCNames, ", "))
				}
				pol.CC, pol.Params = ccName, spec.Matrix.CCParams[ccName]
			}
			if f.Changed("paths") {
				if paths < 1 || paths > 64 {
					return badInput("--paths %d: want 1..64", paths)
				}
				pol.Paths = paths
			}
			if f.Changed("chunk") {
				c, err := units.ParseBytes(chunk)
				if err != nil || c < mptxchunk.MinSize || c > mptxchunk.MaxSize || c%mptxchunk.Align != 0 {
					return badInput("--chunk %q: want a size in [%v, %v], a multiple of %v (the chunk package's bounds)", chunk, mptxchunk.MinSize, mptxchunk.MaxSize, mptxchunk.Align)
				}
				pol.Chunk = c
			}
			if f.Changed("pacing") {
				pol.Pacing = pacing
			}
			if f.Changed("path-policy") {
				if !slices.Contains(experiments.PathPolicies, pathPolicy) {
					return badInput("--path-policy %q: allowed: %s", pathPolicy, strings.Join(experiments.PathPolicies, ", "))
				}
				pol.PathPolicy = pathPolicy
			}
			if !f.Changed("seed") {
				seed = spec.Seeds[0]
			}
			var theirs []interop.FCTRecord
			if compare != "" {
				data, err := os.ReadFile(compare)
				if err != nil {
					return badInput("--compare: %v", err)
				}
				if theirs, err = interop.ParseFCT(bytes.NewReader(data), compare); err != nil {
					return badInput("--compare: %v", err)
				}
			}
			run := experiments.Run{Spec: spec, Policy: pol, Seed: seed, Hash: experiments.RunHash(spec, pol, seed)}
			ctx, finishTrace, err := traceSim(context.Background(), &trace, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			t0 := time.Now()
			res, err := experiments.SimRun(ctx, run)
			if terr := finishTrace(); err == nil {
				err = terr
			}
			if err != nil {
				return err
			}
			res.Row.WallMs = float64(time.Since(t0).Microseconds()) / 1e3
			w := cmd.OutOrStdout()
			sum := experiments.Summarise([]*experiments.Result{res})[0]
			fmt.Fprintf(w, "%s, %s, seed %d: %d events, %.1f µs simulated in %s\n", spec.Name, pol.Key(), seed,
				res.Row.Events, res.Row.SimTimeUs, experiments.FormatWall(time.Since(t0)))
			fmt.Fprintf(w, "link transmissions: %d data, %d ACK/NAK, %d CNP, %d PFC frames\n\n",
				res.Row.TxData, res.Row.TxAck, res.Row.TxCNP, res.Row.TxPFC)
			sum.Table(w)
			if fctOut != "" {
				fh, err := os.Create(fctOut)
				if err != nil {
					return err
				}
				if err := interop.WriteFCT(fh, experiments.FCTRecords(res)); err != nil {
					fh.Close()
					return err
				}
				if err := fh.Close(); err != nil {
					return err
				}
				fmt.Fprintf(w, "\nfct.txt: %s (%d flows)\n", fctOut, res.Row.Completed+res.Row.BgCompleted)
			}
			if theirs != nil {
				fmt.Fprintln(w)
				experiments.CompareFCT(w, experiments.FCTRecords(res), theirs, compare)
			}
			if jsonOut != "" {
				b, err := json.MarshalIndent(res, "", " ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(jsonOut, b, 0o644); err != nil {
					return err
				}
			}
			return incomplete([]*experiments.Result{res})
		},
	}
	f := cmd.Flags()
	f.StringVar(&io.NS3Topology, "ns3-topology", "", "HPCC ns-3 topology.txt")
	f.StringVar(&io.NS3Flows, "ns3-flows", "", "HPCC ns-3 flow.txt")
	f.StringVar(&io.Htsim, "htsim", "", "htsim connection matrix")
	f.StringVar(&io.HostRate, "host-rate", "", "link rate of the fat-tree built for --htsim (default 100Gbps)")
	f.StringVar(&io.LinkDelay, "link-delay", "", "link delay of the fat-tree built for --htsim (default 1us)")
	f.StringVar(&io.NS3Config, "ns3-config", "", "HPCC ns-3 config.txt (NIC, switch and CC settings; its topology and flow files unless given)")
	f.IntVar(&io.MTU, "mtu", 0, "NIC payload per packet for ns-3/htsim scenarios (256..9216; default the other simulator's: ns-3 1000, htsim 4000)")
	f.StringVar(&ccName, "cc", "dcqcn", "congestion control: "+strings.Join(experiments.CCNames, ", "))
	f.IntVar(&paths, "paths", 1, "queue pairs per connection")
	f.StringVar(&chunk, "chunk", "64KiB", "chunk size")
	f.BoolVar(&pacing, "pacing", true, "pace sends at the CC rate")
	f.StringVar(&pathPolicy, "path-policy", "congestion-aware", "path selection: "+strings.Join(experiments.PathPolicies, ", "))
	f.Int64Var(&seed, "seed", 1, "random seed")
	f.DurationVar(&stop, "stop", 0, "virtual-time limit (default: the spec's, or the last flow's start + 1s)")
	f.StringVar(&fctOut, "fct-out", "", "write HPCC ns-3 fct.txt here")
	f.StringVar(&compare, "compare", "", "another simulator's fct.txt for the same flows, to compare")
	f.StringVar(&jsonOut, "json", "", "write the full result (row, flows, series) as JSON here")
	trace.register(cmd)
	_ = cmd.MarkFlagFilename("ns3-config", "txt")
	_ = cmd.MarkFlagFilename("ns3-topology", "txt")
	_ = cmd.MarkFlagFilename("ns3-flows", "txt")
	_ = cmd.MarkFlagFilename("htsim", "cm")
	return cmd
}

func init() { addCommand(simCmd()) }
