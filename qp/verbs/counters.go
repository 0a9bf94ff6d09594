package verbs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/mptx-dev/mptx/qp"
)

// Port counters come from /sys/class/infiniband/DEV/ports/N/hw_counters/
// (the same numbers `rdma statistic show` prints). They are per port, not
// per QP: every path on a port reads the same values, and the driver, which
// diffs successive readings per path, sees a port's congestion on each of
// its paths.
//
// Names differ per driver; each meaning lists the files summed for it:
//
//   - ECNMarked: np_ecn_marked_roce_packets (mlx5: CE-marked RoCE packets
//     the notification point received).
//   - CNPReceived: rp_cnp_handled (mlx5: CNPs the reaction point acted on).
//   - Retransmits: completer_retry_err (rxe: go-back-N retries started by
//     the requester), local_ack_timeout_err and packet_seq_err (mlx5:
//     timeouts and NAK-triggered retransmissions).
//
// Soft-RoCE (rdma_rxe) has no congestion control and no ECN or CNP
// counters at all: on rxe, Caps().ECNCounters and CNPCounters are false and
// those fields stay 0. Nothing is synthesised.
var (
	ecnCounterFiles  = []string{"np_ecn_marked_roce_packets"}
	cnpCounterFiles  = []string{"rp_cnp_handled"}
	retxCounterFiles = []string{"completer_retry_err", "local_ack_timeout_err", "packet_seq_err"}
)

// sysfsRoot is where the infiniband class lives; tests point it elsewhere.
var sysfsRoot = "/sys/class/infiniband"

// counterFile is one open hw_counters file, re-read with ReadAt.
type counterFile struct {
	f   *os.File
	buf [32]byte
}

func (c *counterFile) read() (uint64, error) {
	n, err := c.f.ReadAt(c.buf[:], 0)
	if n == 0 && err != nil {
		return 0, fmt.Errorf("verbs: reading %s: %w", c.f.Name(), err)
	}
	b := c.buf[:n]
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	var v uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, fmt.Errorf("verbs: %s holds %q, not a counter", c.f.Name(), c.buf[:n])
		}
		v = v*10 + uint64(ch-'0')
	}
	return v, nil
}

// portCounters reads one port's congestion counters.
type portCounters struct {
	ecn, cnp, retx []*counterFile
}

// openPortCounters opens the counter files that exist for dev's port.
// Missing files are not an error: the meaning is then unsupported.
func openPortCounters(dev string, port int) (*portCounters, error) {
	dir := filepath.Join(sysfsRoot, dev, "ports", strconv.Itoa(port), "hw_counters")
	open := func(names []string) ([]*counterFile, error) {
		var out []*counterFile
		for _, n := range names {
			f, err := os.Open(filepath.Join(dir, n))
			if os.IsNotExist(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("verbs: opening hw counter: %w", err)
			}
			out = append(out, &counterFile{f: f})
		}
		return out, nil
	}
	pc := &portCounters{}
	var err error
	if pc.ecn, err = open(ecnCounterFiles); err != nil {
		return nil, err
	}
	if pc.cnp, err = open(cnpCounterFiles); err != nil {
		pc.close()
		return nil, err
	}
	if pc.retx, err = open(retxCounterFiles); err != nil {
		pc.close()
		return nil, err
	}
	return pc, nil
}

func sum(fs []*counterFile) (uint64, error) {
	var t uint64
	for _, f := range fs {
		v, err := f.read()
		if err != nil {
			return 0, err
		}
		t += v
	}
	return t, nil
}

// read returns the port's counters. It does not allocate unless a file
// read fails.
func (pc *portCounters) read() (qp.Counters, error) {
	var c qp.Counters
	var err error
	if c.ECNMarked, err = sum(pc.ecn); err != nil {
		return c, err
	}
	if c.CNPReceived, err = sum(pc.cnp); err != nil {
		return c, err
	}
	c.Retransmits, err = sum(pc.retx)
	return c, err
}

func (pc *portCounters) close() {
	for _, l := range [][]*counterFile{pc.ecn, pc.cnp, pc.retx} {
		for _, f := range l {
			f.f.Close()
		}
	}
}
