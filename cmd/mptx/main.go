// Command mptx is the single command-line entry point of mptx: run
// experiments and simulations, send and receive tensors, list RDMA devices
// and analyse traces. Each subcommand lives in its own file and registers
// itself with addCommand from an init function.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// usageError marks bad input: the command exits with status 2 and one line.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// badInput wraps err so that main exits with status 2.
func badInput(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

var rootCmd = &cobra.Command{
	Use:   "mptx",
	Short: "Multipath RoCEv2 tensor transport: simulate, compare and ship",
	Long: `mptx ships large tensors between machines over several RDMA queue pairs per
peer, with per-path congestion control and pacing. This command runs the
fabric simulator and experiment suites, sends and receives tensors, lists RDMA
devices and analyses transfer traces.`,
	SilenceUsage:  true,
	SilenceErrors: true,
}

// addCommand registers a subcommand; called from init functions.
func addCommand(c *cobra.Command) { rootCmd.AddCommand(c) }

func main() {
	rootCmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	err := rootCmd.Execute()
	if err == nil {
		return
	}
	os.Exit(exitStatus(err))
}

// exitStatus prints err on one line and returns the exit status: 2 for
// bad input, 128+n for a run stopped by signal n, else 1.
func exitStatus(err error) int {
	// The library's errors start with "mptx: " too: say it once.
	fmt.Fprintln(os.Stderr, "mptx:", strings.TrimPrefix(err.Error(), "mptx: "))
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		os.Exit(ec.ExitCode())
	}
	var u usageError
	var i interrupted
	switch {
	case errors.As(err, &u) || isCobraUsage(err):
		return 2
	case errors.As(err, &i):
		return i.exitCode()
	}
	return 1
}

// isCobraUsage recognises cobra's own argument errors (unknown command,
// wrong argument count), which are bad input too.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "requires at most", "unknown flag", "unknown shorthand"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
