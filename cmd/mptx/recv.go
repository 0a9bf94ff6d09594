package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/mptx-dev/mptx"
	"github.com/mptx-dev/mptx/telemetry"
	"github.com/mptx-dev/mptx/units"
)

func init() {
	var (
		xf      xferFlags
		vf      verbsFlags
		listen  string
		out     string
		maxSize string
		count   int
	)
	cmd := &cobra.Command{
		Use:   "recv",
		Short: "Receive tensors from mptx send over TCP or RDMA, and write them to files",
		Long: `recv listens on --listen (HOST:PORT; port 0 picks one, printed on stderr) for
senders that prove the shared secret, and serves them one after another and
at the same time, each over its own session, until it is stopped (Ctrl-C) or,
with --count N, until N tensors have ended. Peers that fail authentication
get nothing: no session, no memory.

Each session has a receive region of --max-size bytes (allocated when the
session is accepted, touched as tensors land): the tensors of a session in
flight at once share it, and a larger tensor is refused.

When a tensor is reported: every chunk landed, the sender fenced the transfer
(nothing of it can land any more) and recv checked its CRC-32C (unless the
sender sent none) and acknowledged it; then it is written to --out, or
discarded without --out. One line per tensor on stdout (a JSON object per
line with --json); sessions come and go on stderr. The sender's success means
the tensor reached this process intact; a failure to write it (disk full) is
reported here only.

--out DIR (created if missing): each tensor becomes one file in DIR, named
after the tensor, safely:
  - the name is the sender's tensor name with '/', '\', NUL, control
    characters and invalid UTF-8 replaced by '_', a leading '.' by '_', cut
    to 200 bytes ("tensor" if empty): it cannot name a path outside DIR,
    a hidden file or "..", and every file operation is confined to DIR
    (os.Root: no symbolic link leads out of it);
  - nothing is overwritten: if NAME exists, the tensor is NAME.1, NAME.2...;
  - no partial files: a tensor is written to a hidden temporary file and
    linked to its name once complete (written and closed, not fsynced).

Exit status: with --count N, 0 if all N tensors arrived and were written, else
1; stopped by Ctrl-C, 130 (tensors in progress are cancelled on both ends);
2 bad input; 1 if listening fails.
With --transport verbs --direct (the direct RDMA path, no session), recv takes
one tensor from one sender and exits; --out is then the directory the one
tensor is written to, by the same rules.
` + transportsHelp,
		Example: `  MPTX_SECRET=$(cat /etc/mptx.secret) mptx recv --listen :7471 --out /data/incoming
  mptx recv --listen 10.0.0.2:7471 --secret-file s.key --out in --count 2 --json
  mptx recv --transport verbs --listen 10.0.0.2:7471 --devices mlx5_0,mlx5_1 --secret-file s.key --out in
  mptx recv --transport verbs --direct --listen 10.0.0.2:7471 --devices mlx5_0,mlx5_1 --secret-file s.key --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tr, err := xf.parseTransport(cmd, &vf, "count")
			if err != nil {
				return err
			}
			if count < 0 {
				return badInput("--count %d: want 0 (serve until stopped) or more", count)
			}
			secret, err := xf.secret()
			if err != nil {
				return err
			}
			if maxSize == "" {
				maxSize = "1GiB"
				if vf.direct {
					maxSize = "256MiB"
				}
			}
			max, err := units.ParseBytes(maxSize)
			if err != nil || max <= 0 {
				return badInput("--max-size %q: want a size such as 1GiB", maxSize)
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
			if vf.direct {
				qc, err := vf.qpConfig()
				if err != nil {
					return err
				}
				pool, err := vf.poolSize(max)
				if err != nil {
					return err
				}
				sum, err := runRecvVerbs(ctx, cmd.ErrOrStderr(), verbsRecvParams{listen: listen, out: od, secret: secret, devices: vf.deviceList(),
					pool: pool, max: max, qp: qc, progress: xf.progress(), busyPoll: vf.busyPoll})
				if sum != nil {
					printRecvSummary(cmd.OutOrStdout(), sum, xf.asJSON)
				}
				if cause := stopped(ctx); cause != nil {
					return cause
				}
				return err
			}
			vcfg, err := vf.sessionVerbs(0)
			if err != nil {
				return err
			}
			if tr == mptx.TransportVerbs {
				if err := vf.checkVerbs(); err != nil {
					return err
				}
			}
			cfg := mptx.Config{Secret: secret, Transport: tr, RegionSize: max, Verbs: vcfg, Timeout: xf.timeout}
			tel, err := xf.trace.start(ctx, "mptx-recv", false)
			if err != nil {
				return err
			}
			if tel != nil {
				cfg.Telemetry = telemetry.Sessions{T: tel}
			}
			err = runRecvSession(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), sessionRecvParams{listen: listen, cfg: cfg, out: od, count: count, asJSON: xf.asJSON})
			if ferr := finishTelemetry(context.WithoutCancel(ctx), tel, cmd.ErrOrStderr()); ferr != nil && err == nil {
				err = ferr
			}
			return err
		},
	}
	registerXferFlags(cmd, &xf, &vf)
	f := cmd.Flags()
	f.StringVar(&listen, "listen", ":7471", "TCP address to listen on (HOST:PORT; port 0 picks a free one)")
	f.StringVar(&out, "out", "", "directory to write each tensor to, as a file named after it (default: discard after checking)")
	f.StringVar(&maxSize, "max-size", "", "largest tensor accepted: each session's receive region (default 1GiB; 256MiB of registered pool with --direct)")
	f.IntVar(&count, "count", 0, "session: exit after this many tensors have ended, delivered or failed (0 = serve until stopped)")
	addCommand(cmd)
}
