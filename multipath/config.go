package multipath

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/mptx-dev/mptx/cc"
	"github.com/mptx-dev/mptx/units"
)

// MaxPaths is the largest number of paths one engine drives.
const MaxPaths = 64

// Policy names a path-selection policy.
type Policy uint8

// Path-selection policies.
const (
	// CongestionAware picks the path with the earliest estimated finish
	// time and leaves slow paths idle near the tail (see the package doc).
	CongestionAware Policy = iota
	// RoundRobin cycles through free paths.
	RoundRobin
	// Random picks a free path uniformly at random.
	Random
	// MinRTT picks the free path with the smallest smoothed RTT.
	MinRTT
	// PowerOfTwo samples two free paths at random and takes the one with
	// the earlier estimated finish time.
	PowerOfTwo
)

var policyNames = [...]string{
	CongestionAware: "congestion-aware",
	RoundRobin:      "round-robin",
	Random:          "random",
	MinRTT:          "min-rtt",
	PowerOfTwo:      "p2c",
}

// String returns the policy's name as ParsePolicy accepts it.
func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// PolicyNames returns the valid policy names.
func PolicyNames() []string { return append([]string(nil), policyNames[:]...) }

// ParsePolicy parses a policy name ("congestion-aware", "round-robin",
// "random", "min-rtt", "p2c"); the empty string is CongestionAware.
func ParsePolicy(s string) (Policy, error) {
	if s == "" {
		return CongestionAware, nil
	}
	for i, n := range policyNames {
		if strings.EqualFold(s, n) {
			return Policy(i), nil
		}
	}
	return 0, fmt.Errorf("multipath: unknown path policy %q (valid: %s)", s, strings.Join(policyNames[:], ", "))
}

// PathConfig describes one path (one RC queue pair) to the engine.
type PathConfig struct {
	Name     string        // for errors and telemetry, e.g. "mlx5_0/qp17"; default "path<i>"
	NIC      int           // local NIC port index; paths with equal NIC share a port pacer
	LineRate units.BitRate // NIC port rate; required
	BaseRTT  time.Duration // empty-path RTT estimate; 0 means 10 µs
	MTU      units.Bytes   // payload bytes per packet; 0 means 4096
	Hops     int           // switch hops; 0 means unknown (1)
	// Tier ranks the path in the host's topology, 0..MaxPaths-1, lower
	// preferred (qp/verbs.PathChoice.Tier: the NIC on the memory's PCIe
	// switch or NUMA node, rail-aligned with the peer's): new chunks go
	// to the lowest tier that has an up path with room, and spill to the
	// next only after Config.TierSpill without room there (see the package
	// doc, "Tiers"). Default 0: every path in one tier.
	Tier int
}

// PacingConfig configures the per-path and per-port token buckets.
type PacingConfig struct {
	// Disabled turns pacing off: segments go out as fast as the window
	// allows (the NIC then bursts at line rate).
	Disabled bool
	// Hardware paces in the NIC instead (ibv_modify_qp_rate_limit(3), the
	// simulator's per-QP rate limit): no software buckets, each chunk is
	// posted as one work request unless Config.Segment is set, and
	// Actions emits ActSetRate whenever a path's CC rate changes so the
	// driver can program the queue pair.
	Hardware bool
	// Burst is the bucket depth per path; 0 takes pacing's default, which
	// stays below PFCXoff (see package pacing).
	Burst units.Bytes
	// PFCXoff is the switches' PFC XOFF threshold the bursts must stay
	// under; 0 takes pacing's default.
	PFCXoff units.Bytes
}

// Config configures an Engine. Zero fields take the documented defaults.
type Config struct {
	// Paths lists the paths, 1..MaxPaths.
	Paths []PathConfig
	// CC names the congestion-control algorithm (cc.Names()); default
	// "dcqcn". CCParams are its tunables.
	CC       string
	CCParams cc.Params
	// NewCC, if set, builds each path's algorithm instead of CC/CCParams.
	NewCC func(path int, info cc.PathInfo) (cc.Algorithm, error)
	// Policy selects paths; default CongestionAware.
	Policy Policy
	// ChunkSize is the default chunk size for transfers that do not set
	// one: 0 chooses automatically in 2–4 MiB (chunk.NewPlan).
	ChunkSize units.Bytes
	// Segment is the largest work request a chunk is posted as; 0 means
	// the pacer's default for each path's line rate (pacing.Config.Segment
	// and LineRate: 128 KiB up to 100 Gb/s, 10.49 µs of the line above it,
	// 512 KiB at 400 Gb/s), a whole chunk with hardware pacing, 128 KiB
	// with pacing disabled.
	Segment units.Bytes
	// Pacing configures the token buckets.
	Pacing PacingConfig
	// MaxInFlight caps each path's window on top of the CC window
	// (rate-based algorithms report an unlimited window); 0 means two
	// bandwidth-delay products of the path (LineRate × BaseRTT). The
	// engine lets a path's posted-but-uncompleted bytes reach the window
	// plus two segments (see Engine.post).
	MaxInFlight units.Bytes
	// MaxTransfers bounds concurrent transfers; 0 means chunk.MaxSlots.
	MaxTransfers int
	// MaxWRPerPath bounds outstanding work requests per path (the send
	// queue depth); 0 means 64.
	MaxWRPerPath int
	// MinTimeout is the floor of the per-path stall timeout; 0 means 10 ms.
	MinTimeout time.Duration
	// QuarantineMin and QuarantineMax bound the probe backoff of an
	// errored path; 0 means 1 ms and 1 s.
	QuarantineMin, QuarantineMax time.Duration
	// MaxProbeFailures consecutive failed probes make a path dead; 0
	// means 5.
	MaxProbeFailures int
	// ProbeInterval, if > 0, probes idle usable paths this often to keep
	// their RTT fresh.
	ProbeInterval time.Duration
	// ECNPenalty scales the congestion-aware estimate of a path whose
	// recent chunks saw marks: finish·(1 + ECNPenalty·marked). 0 means 1;
	// negative disables.
	ECNPenalty float64
	// PriorityGuard bounds the starvation of lower priority classes
	// (TransferSpec.Priority): once the highest class with pending chunks
	// has been handed this many bytes of chunks while a lower class had
	// chunks waiting, the next chunk goes to the waiting lower class
	// served least recently. 0 means 64 MiB; negative disables the guard
	// (strict priority).
	PriorityGuard units.Bytes
	// Priorities declares that the engine will carry transfers of
	// several priority classes: the default class keeps a shallow send
	// queue from the start (see the package doc, "Priorities"), as it
	// otherwise does only once a transfer of a higher class has been
	// submitted.
	Priorities bool
	// TierSpill is how long every up path of the open tiers must have had
	// no room for a waiting chunk before the next tier (PathConfig.Tier)
	// gets chunks; 0 means four round trips of the open tiers' slowest
	// path (smoothed RTT, BaseRTT before a sample); negative spills at
	// once.
	TierSpill time.Duration
	// Rand is the randomness for the Random and PowerOfTwo policies; nil
	// means a PCG seeded with Seed.
	Rand *rand.Rand
	Seed uint64
	// Recorder receives telemetry events; nil (the default) records nothing.
	Recorder Recorder
}

func (c *Config) validate() error {
	if n := len(c.Paths); n < 1 || n > MaxPaths {
		return fmt.Errorf("multipath: Config.Paths has %d paths (valid: 1..%d)", n, MaxPaths)
	}
	for i, p := range c.Paths {
		if p.LineRate <= 0 {
			return fmt.Errorf("multipath: Config.Paths[%d].LineRate = %d bit/s (valid: > 0)", i, p.LineRate)
		}
		if p.BaseRTT < 0 {
			return fmt.Errorf("multipath: Config.Paths[%d].BaseRTT = %v (valid: >= 0)", i, p.BaseRTT)
		}
		if p.MTU < 0 || p.MTU > 64*units.KiB {
			return fmt.Errorf("multipath: Config.Paths[%d].MTU = %d B (valid: 0 for 4096, or 1..65536)", i, p.MTU)
		}
		if p.NIC < 0 || p.NIC >= MaxPaths {
			return fmt.Errorf("multipath: Config.Paths[%d].NIC = %d (valid: 0..%d)", i, p.NIC, MaxPaths-1)
		}
		if p.Tier < 0 || p.Tier >= MaxPaths {
			return fmt.Errorf("multipath: Config.Paths[%d].Tier = %d (valid: 0..%d, lower preferred)", i, p.Tier, MaxPaths-1)
		}
	}
	if int(c.Policy) >= len(policyNames) {
		return fmt.Errorf("multipath: Config.Policy = %d (valid: %s)", c.Policy, strings.Join(policyNames[:], ", "))
	}
	if c.Segment < 0 {
		return fmt.Errorf("multipath: Config.Segment = %d B (valid: >= 0)", c.Segment)
	}
	if c.MaxInFlight < 0 {
		return fmt.Errorf("multipath: Config.MaxInFlight = %d B (valid: >= 0)", c.MaxInFlight)
	}
	if c.MaxTransfers < 0 {
		return fmt.Errorf("multipath: Config.MaxTransfers = %d (valid: >= 0)", c.MaxTransfers)
	}
	if c.MaxWRPerPath < 0 || c.MaxWRPerPath > 1<<16 {
		return fmt.Errorf("multipath: Config.MaxWRPerPath = %d (valid: 0..65536)", c.MaxWRPerPath)
	}
	if c.MinTimeout < 0 || c.QuarantineMin < 0 || c.QuarantineMax < 0 || c.ProbeInterval < 0 {
		return fmt.Errorf("multipath: timeouts must be >= 0 (MinTimeout %v, QuarantineMin %v, QuarantineMax %v, ProbeInterval %v)",
			c.MinTimeout, c.QuarantineMin, c.QuarantineMax, c.ProbeInterval)
	}
	if c.QuarantineMax > 0 && c.QuarantineMin > c.QuarantineMax {
		return fmt.Errorf("multipath: Config.QuarantineMin %v > QuarantineMax %v", c.QuarantineMin, c.QuarantineMax)
	}
	if c.MaxProbeFailures < 0 {
		return fmt.Errorf("multipath: Config.MaxProbeFailures = %d (valid: >= 0)", c.MaxProbeFailures)
	}
	return nil
}
