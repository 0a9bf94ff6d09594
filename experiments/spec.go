package experiments

import (
	"strconv"
	"strings"
	"time"

	"github.com/mptx-dev/mptx/experiments/interop"
	"github.com/mptx-dev/mptx/units"
)

// NS3Topology is a parsed HPCC ns-3 topology.txt.
type NS3Topology = interop.NS3Topology

// Spec is one experiment scenario and the policies to compare on it. The
// field-by-field reference with examples is docs/experiments.md; Parse and
// ParseFile build a Spec from YAML, fill in defaults and validate it.
//
// The zero Spec is not valid. After Parse a Spec is read-only.
type Spec struct {
	// Name identifies the scenario in results and file names:
	// lower-case letters, digits, '-' and '_'.
	Name string `yaml:"name" json:"name"`
	// Description is free text for summaries; it is not part of any hash.
	Description string       `yaml:"description" json:"-"`
	Topology    Topology     `yaml:"topology" json:"topology"`
	Switch      SwitchConfig `yaml:"switch" json:"switch"`
	NIC         NICConfig    `yaml:"nic" json:"nic"`
	// Workloads are generated together into one flow list per run.
	Workloads []Workload `yaml:"workloads" json:"workloads"`
	Matrix    Matrix     `yaml:"matrix" json:"-"`
	// Seeds are the random seeds each matrix point is run with.
	Seeds  []int64      `yaml:"seeds" json:"-"`
	Stop   StopConfig   `yaml:"stop" json:"stop"`
	Sample SampleConfig `yaml:"sample" json:"sample"`
	// Objective is how summaries rank the policies; it does not change
	// any run, so it is not part of the run hash.
	Objective Objective `yaml:"objective" json:"-"`

	// Sweep lists the swept parameters as the spec's sweep section wrote
	// them (nil without one). Params are this spec's values of them, one
	// per Sweep entry, in order: every point of a sweep is a complete
	// Spec (see Points), and its Params enter its runs' hashes.
	Sweep  []SweepParam `yaml:"-" json:"-"`
	Params []Param      `yaml:"-" json:"-"`

	// File is where the spec was read from ("" for in-memory specs).
	File string `yaml:"-" json:"-"`
	// dir resolves relative file references.
	dir string
	// src is the spec's source text, for reports.
	src []byte
	// points are the sweep's points, the spec itself first; nil when the
	// spec is not the first point of a sweep.
	points []*Spec
}

// Points returns the spec's sweep points, each a complete, validated Spec
// whose Params hold its values of the swept parameters, in the order the
// sweep section lists them (the first parameter varies slowest). A spec
// without a sweep is its own only point.
func (s *Spec) Points() []*Spec {
	if len(s.points) == 0 {
		return []*Spec{s}
	}
	return s.points
}

// Source returns the YAML the spec was parsed from (nil for specs built
// in memory without one).
func (s *Spec) Source() []byte { return s.src }

// SweepParam is one swept spec field.
type SweepParam struct {
	// Path names the field as a dotted path with list indices, e.g.
	// "switch.buffer" or "workloads[0].senders".
	Path string
	// Label is the axis label for plots; default Path.
	Label string
	// Values are the values to run, as written (or generated from a
	// range), each a scalar that the field accepts.
	Values []string
	// Kind says how the values are numbers (ParamSize, ParamRate, ...).
	Kind string
}

// Param is one swept parameter's value in a run.
type Param struct {
	// Name is the field's spec path (SweepParam.Path).
	Name string `json:"name"`
	// Label is the axis label (SweepParam.Label).
	Label string `json:"label,omitempty"`
	// Value is the value as written in the spec.
	Value string `json:"value"`
	// Kind says what X measures; X is the value as a number in the unit
	// Kind implies (see the Param* constants): plots put X on their axis
	// and results.csv writes it in the column Column names.
	Kind string  `json:"kind"`
	X    float64 `json:"x"`
}

// Display is the value as tables and plots show it: a host set's size
// (an incast degree), the value as written otherwise.
func (p Param) Display() string {
	if p.Kind == ParamHosts {
		return strconv.FormatFloat(p.X, 'g', -1, 64)
	}
	return p.Value
}

// Param kinds: what Param.X measures.
const (
	ParamSize     = "size"     // bytes
	ParamRate     = "rate"     // Gbit/s
	ParamDuration = "duration" // microseconds
	ParamNumber   = "number"   // the number itself
	ParamHosts    = "hosts"    // how many hosts the set holds
	ParamText     = "text"     // the value's position in the sweep's list (0, 1, ...)
)

// Column is the results.csv / results.jsonl column that holds the
// parameter: its name with the unit of X appended
// ("switch.buffer_bytes", "topology.host_rate_gbps").
func (p Param) Column() string {
	switch p.Kind {
	case ParamSize:
		return p.Name + "_bytes"
	case ParamRate:
		return p.Name + "_gbps"
	case ParamDuration:
		return p.Name + "_us"
	case ParamHosts:
		return p.Name + "_hosts"
	}
	return p.Name
}

// Objective says how a scenario's policies are ranked: by Metric (a
// results column; lower is better unless Goal is max), among the policies
// that meet every Require constraint.
type Objective struct {
	// Metric is a results column: fct_p99_us (default), fct_p50_us,
	// fct_mean_us, fct_max_us, slowdown_p50, slowdown_p99, goodput_gbps,
	// bg_fct_p99_us, bg_slowdown_p99, pfc_paused_us, max_queue_bytes.
	Metric string `yaml:"metric" json:"metric"`
	// Goal is min (default; max for goodput_gbps) or max.
	Goal string `yaml:"goal" json:"goal"`
	// Require lists constraints every seed of a policy must meet:
	// completed (every tensor flow completed), no_drops, no_pauses (no
	// PFC pause frames), no_failures (no flow failed). Default
	// [completed, no_drops].
	Require []string `yaml:"require" json:"require"`
}

// Topology kinds.
const (
	TopoStar      = "star"       // one switch, Hosts hosts
	TopoDumbbell  = "dumbbell"   // two switches joined by one fabric link, Hosts hosts on each
	TopoLeafSpine = "leaf-spine" // Leaves × HostsPerLeaf hosts, every leaf linked to every spine
	TopoFatTree   = "fat-tree"   // k-ary fat tree (Al-Fares et al., SIGCOMM'08): k³/4 hosts
	TopoMultiRail = "multi-rail" // Hosts hosts with Rails NICs each, NIC r on plane r (a leaf-spine per rail)
	TopoNS3       = "ns3"        // read from an HPCC ns-3 topology.txt
)

var topoKinds = []string{TopoStar, TopoDumbbell, TopoLeafSpine, TopoFatTree, TopoMultiRail, TopoNS3}

// Topology describes the fabric. Host ids are 0..Hosts()-1 in the order the
// kind defines (docs/experiments.md, "topology").
type Topology struct {
	Kind   string `yaml:"kind" json:"kind"`
	Hosts  int    `yaml:"hosts" json:"hosts,omitzero"`
	Leaves int    `yaml:"leaves" json:"leaves,omitempty"`
	// Spines is leaf-spine's spine count, and multi-rail's spines per
	// plane (default 1).
	Spines int `yaml:"spines" json:"spines,omitempty"`
	// HostsPerLeaf is leaf-spine's hosts per leaf, and multi-rail's hosts
	// per leaf in each plane (default all hosts on one leaf).
	HostsPerLeaf int `yaml:"hosts_per_leaf" json:"hosts_per_leaf,omitempty"`
	K            int `yaml:"k" json:"k,omitempty"`
	Rails        int `yaml:"rails" json:"rails,omitempty"`
	// HostRate is every host link's rate; default 100Gbps.
	HostRate Rate `yaml:"host_rate" json:"host_rate"`
	// FabricRate is every switch-to-switch link's rate; default HostRate.
	FabricRate Rate `yaml:"fabric_rate" json:"fabric_rate"`
	// LinkDelay is every link's one-way propagation delay; default 1us.
	LinkDelay Duration `yaml:"link_delay" json:"link_delay"`
	// Loss is the probability a frame is lost at random on every link, in
	// each direction (PFC frames never are); default 0.
	Loss float64 `yaml:"loss" json:"loss,omitempty"`
	// HostOverrides give some hosts' NIC links another rate, e.g. a slow
	// receiver whose NIC drains at 10Gbps.
	HostOverrides []HostOverride `yaml:"host_overrides" json:"host_overrides,omitempty"`
	// File is the ns-3 topology.txt for kind ns3, relative to the spec.
	File string `yaml:"file" json:"-"`

	// NS3 is the parsed File (kind ns3 only).
	NS3 *NS3Topology `yaml:"-" json:"ns3,omitempty"`
}

// HostOverride sets the rate of the NIC links of Hosts.
type HostOverride struct {
	Hosts HostSet `yaml:"hosts" json:"hosts"`
	Rate  Rate    `yaml:"rate" json:"rate"`
}

// SwitchConfig is every switch's buffer, PFC and ECN configuration.
type SwitchConfig struct {
	// Buffer is the shared packet buffer per switch; default 16MiB (the
	// HPCC ns-3 default, BUFFER_SIZE 16).
	Buffer Size      `yaml:"buffer" json:"buffer"`
	PFC    PFCConfig `yaml:"pfc" json:"pfc"`
	ECN    ECNConfig `yaml:"ecn" json:"ecn"`
}

// PFCConfig configures IEEE 802.1Qbb priority flow control on the lossless
// class.
type PFCConfig struct {
	// Enabled turns PFC on; default true. With PFC off the fabric is lossy
	// and drops on buffer overflow.
	Enabled *bool `yaml:"enabled" json:"enabled"`
	// XOFF is a static per-ingress-queue pause threshold. Zero (the
	// default) selects the dynamic threshold: pause when the ingress queue
	// exceeds Alpha × free shared buffer (HPCC ns-3 switch-mmu).
	XOFF Size `yaml:"xoff" json:"xoff"`
	// Alpha is the dynamic threshold's fraction of free buffer; default
	// 0.125 (1/8, HPCC ns-3).
	Alpha float64 `yaml:"alpha" json:"alpha"`
	// Headroom per ingress port absorbs what is in flight after a pause;
	// zero means 3 × rate × link delay (HPCC ns-3).
	Headroom Size `yaml:"headroom" json:"headroom"`
	// Hysteresis is XOFF − XON; default 3KiB (HPCC ns-3: XON = XOFF − 3 KB).
	Hysteresis Size `yaml:"hysteresis" json:"hysteresis"`
	// Watchdog detects ports paused continuously for its threshold (pause
	// storms, deadlocks) as switch PFC watchdogs do; off by default.
	Watchdog WatchdogConfig `yaml:"watchdog" json:"watchdog"`
}

// WatchdogConfig configures the PFC watchdog of every port.
type WatchdogConfig struct {
	// Threshold is how long a port must stay paused to trigger; 0 disables
	// the watchdog.
	Threshold Duration `yaml:"threshold" json:"threshold,omitempty"`
	// Recover makes a triggered switch port drop its lossless traffic and
	// ignore pause (SONiC pfcwd "drop"), and a NIC ignore pause (mlx5 stall
	// prevention), for Restore.
	Recover bool `yaml:"recover" json:"recover,omitempty"`
	// Restore is how long recovery lasts; default 10 × Threshold.
	Restore Duration `yaml:"restore" json:"restore,omitempty"`
}

// ECNConfig configures RED-style ECN marking on egress queues: no marks
// below KMin, probability rising linearly to PMax at KMax, always above.
type ECNConfig struct {
	// Enabled turns marking on; default true.
	Enabled *bool `yaml:"enabled" json:"enabled"`
	// KMin and KMax default to the HPCC ns-3 map scaled by the egress link
	// rate: 100KB/400KB per 25Gbps (400KB/1600KB at 100Gbps). Zero means
	// that default.
	KMin Size `yaml:"kmin" json:"kmin"`
	KMax Size `yaml:"kmax" json:"kmax"`
	// PMax is the marking probability at KMax; default 0.2 (HPCC ns-3).
	PMax float64 `yaml:"pmax" json:"pmax"`
	// ByRate gives ports of a listed link rate their own thresholds, as
	// HPCC ns-3's KMIN_MAP/KMAX_MAP/PMAX_MAP do; other ports use the
	// fields above.
	ByRate []ECNRate `yaml:"by_rate" json:"by_rate,omitempty"`
}

// ECNRate is one link rate's RED thresholds.
type ECNRate struct {
	Rate Rate    `yaml:"rate" json:"rate"`
	KMin Size    `yaml:"kmin" json:"kmin"`
	KMax Size    `yaml:"kmax" json:"kmax"`
	PMax float64 `yaml:"pmax" json:"pmax"`
}

// NICConfig configures every simulated NIC (a RoCEv2 RNIC with RC queue
// pairs and go-back-N loss recovery).
type NICConfig struct {
	// MTU is the payload per packet: 256 to 9216 bytes (the simulator
	// takes any payload, so another simulator's 1000 or 4000 runs as is;
	// RoCE NICs use the IB path MTUs 256–4096); default 4096.
	MTU Size `yaml:"mtu" json:"mtu"`
	// Header is the header bytes of every data packet: 0 (the default)
	// for RoCEv2 framing (62 bytes, plus RETH/ImmDt), or 1–1024 for
	// another simulator's (HPCC ns-3 48, htsim 64).
	Header Size `yaml:"header" json:"header,omitempty"`
	// AckInDataClass sends ACKs, NAKs and CNPs in the data class instead
	// of the strict-priority control class (HPCC ns-3 ACK_HIGH_PRIO 0).
	AckInDataClass bool `yaml:"ack_in_data_class" json:"ack_in_data_class,omitempty"`
	// AckEvery makes the responder acknowledge every AckEvery packets (and
	// every message's last); default 4.
	AckEvery int `yaml:"ack_every" json:"ack_every"`
	// CNPInterval is the notification point's minimum gap between CNPs per
	// QP; default 50us (DCQCN, Zhu et al. SIGCOMM'15 §3; mlx5
	// np_min_time_between_cnps).
	CNPInterval Duration `yaml:"cnp_interval" json:"cnp_interval"`
	// NAKInterval is how soon a responder may repeat a NAK; default 500us
	// (HPCC ns-3 RdmaHw nack_interval).
	NAKInterval Duration `yaml:"nak_interval" json:"nak_interval"`
	// AckTimeout is the RC local ACK timeout exponent t: retransmit after
	// 4.096us × 2^t without progress (ibv_modify_qp(3) IBV_QP_TIMEOUT);
	// default 14 (67ms); -1 means infinite.
	AckTimeout int `yaml:"ack_timeout" json:"ack_timeout"`
	// RetryCount is the retransmissions without progress before a QP
	// errors (IBV_QP_RETRY_CNT, 0..7); default 7.
	RetryCount *int `yaml:"retry_count" json:"retry_count"`
	// SendQueue is the send-queue depth per QP in work requests; default 256.
	SendQueue int `yaml:"send_queue" json:"send_queue"`
	// DCQCN holds the NIC's own DCQCN parameters, used by the nic-dcqcn
	// policy (names as the cc registry's dcqcn takes them).
	DCQCN map[string]string `yaml:"dcqcn" json:"dcqcn,omitempty"`
	// HPCC holds the NIC's own HPCC parameters, used by the nic-hpcc
	// policy (names as the cc registry's hpcc takes them).
	HPCC map[string]string `yaml:"hpcc" json:"hpcc,omitempty"`
}

// Workload kinds.
const (
	WorkIncast      = "incast"      // N senders → one receiver
	WorkPermutation = "permutation" // each host sends to one other, every host receives once
	WorkAllToAll    = "all-to-all"  // every host sends to every other
	WorkKVCache     = "kvcache"     // prefill hosts ship KV tensors to decode hosts at a Poisson rate
	WorkBackground  = "background"  // Poisson flows with sizes from a CDF
	WorkFailure     = "failure"     // a link or NIC goes down (and optionally up)
	WorkNS3Flows    = "ns3-flows"   // flows from an HPCC ns-3 flow.txt
	WorkHtsim       = "htsim"       // flows from an htsim connection matrix
)

var workKinds = []string{WorkIncast, WorkPermutation, WorkAllToAll, WorkKVCache, WorkBackground, WorkFailure, WorkNS3Flows, WorkHtsim}

// Workload is one traffic (or failure) generator. Which fields apply
// depends on Kind; setting a field that does not apply is an error.
type Workload struct {
	Kind string `yaml:"kind" json:"kind"`
	// Name labels the workload's flows in results; default the kind.
	Name string `yaml:"name" json:"name"`
	// Class is how results count the workload's flows: tensor (measured:
	// the FCT and slowdown columns) or background (load: the bg columns).
	// Default background for background workloads, tensor otherwise.
	Class string `yaml:"class" json:"class"`
	// Priority is the transfer priority of the workload's flows
	// (multipath.TransferSpec.Priority: 0, the default, to 7, higher
	// served first by the engine of the connection they share).
	Priority int `yaml:"priority" json:"priority,omitempty"`
	// Connection is which connection between two hosts carries the
	// workload's flows: tensor (the one with matrix.paths queue pairs;
	// default for tensor-class workloads) or background (one queue pair,
	// of its own; default for background-class workloads). A background
	// workload on the tensor connection is bulk load that shares the
	// tensors' engine, whose priorities then decide between them.
	Connection string `yaml:"connection" json:"connection,omitempty"`

	// Hosts restricts permutation, all-to-all and background to a host
	// set; default all hosts.
	Hosts HostSet `yaml:"hosts" json:"hosts,omitzero"`
	// Senders and Receiver define an incast.
	Senders  HostSet `yaml:"senders" json:"senders,omitzero"`
	Receiver *int    `yaml:"receiver" json:"receiver,omitempty"`
	// Prefill and Decode are the kvcache host sets.
	Prefill HostSet `yaml:"prefill" json:"prefill,omitzero"`
	Decode  HostSet `yaml:"decode" json:"decode,omitzero"`

	// Size is the bytes per flow (incast, permutation, all-to-all per
	// pair; kvcache per request).
	Size SizeDist `yaml:"size" json:"size,omitzero"`
	// Start is when the first flow starts; Repeat runs the pattern that
	// many times, Interval apart (incast, permutation, all-to-all).
	Start    Duration `yaml:"start" json:"start"`
	Repeat   int      `yaml:"repeat" json:"repeat,omitempty"`
	Interval Duration `yaml:"interval" json:"interval,omitempty"`
	// CrossLeaf makes permutation pair each host with a host under another
	// leaf (leaf-spine and fat-tree), so every flow crosses the spine.
	CrossLeaf bool `yaml:"cross_leaf" json:"cross_leaf,omitempty"`
	// Pull makes every flow one-sided, driven by its destination: the
	// destination host reads the bytes out of the source host's exposed
	// memory with RDMA READs (its engine paces the requests by the bytes
	// they bring back), instead of the source pushing them (incast,
	// permutation, all-to-all, kvcache). The bytes cross the fabric from
	// source to destination either way.
	Pull bool `yaml:"pull" json:"pull,omitempty"`

	// Rate is the kvcache request arrival rate (requests per second,
	// Poisson); Count caps the number of requests (kvcache) or flows
	// (background); Duration bounds the arrival window.
	Rate     float64  `yaml:"rate" json:"rate,omitempty"`
	Count    int      `yaml:"count" json:"count,omitempty"`
	Duration Duration `yaml:"duration" json:"duration,omitempty"`

	// CDF names the background flow-size distribution: websearch, hadoop
	// or a file path. Load is the offered load per sending host as a
	// fraction of its link rate.
	CDF  string  `yaml:"cdf" json:"cdf,omitempty"`
	Load float64 `yaml:"load" json:"load,omitempty"`

	// Target is what a failure takes down: "link:A-B" (switch or host
	// names as the topology defines them) or "nic:H" / "nic:H.N".
	Target string   `yaml:"target" json:"target,omitempty"`
	Down   Duration `yaml:"down" json:"down,omitempty"`
	Up     Duration `yaml:"up" json:"up,omitempty"`

	// File is the ns-3 flow.txt or htsim connection matrix, relative to the
	// spec.
	File string `yaml:"file" json:"-"`

	// Loaded holds the flows read from File (ns3-flows, htsim) and CDFData
	// the CDF points; both enter the run hash instead of the path.
	Loaded         []Flow     `yaml:"-" json:"loaded,omitempty"`
	LoadedTriggers []Trigger  `yaml:"-" json:"loaded_triggers,omitempty"`
	CDFData        []CDFPoint `yaml:"-" json:"cdf_data,omitempty"`
}

// CC policy names accepted in matrix.cc. "nic-dcqcn" runs the simulated
// NIC's DCQCN (per packet and per CNP) and "nic-hpcc" its HPCC (per ACK,
// with switch INT), each with the software CC fixed at line rate; "none"
// runs neither.
const (
	CCNICDCQCN = "nic-dcqcn"
	CCNICHPCC  = "nic-hpcc"
	CCNone     = "none"
)

// SoftwareCCs are the cc registry algorithms the matrix may name.
var SoftwareCCs = []string{"dcqcn", "timely", "swift", "hpcc", "fixed"}

// CCNames are every value matrix.cc accepts.
var CCNames = append(append([]string(nil), SoftwareCCs...), CCNICDCQCN, CCNICHPCC, CCNone)

// PathPolicies are the multipath engine's path-selection policies.
var PathPolicies = []string{"congestion-aware", "round-robin", "random", "min-rtt", "p2c"}

// Matrix lists the values of each policy dimension; runs cover their
// cartesian product. A dimension given as a single value (cc: dcqcn) is a
// one-element list.
type Matrix struct {
	CC         []string `yaml:"cc"`
	Paths      []int    `yaml:"paths"`
	Chunk      []Size   `yaml:"chunk"`
	Pacing     []bool   `yaml:"pacing"`
	PathPolicy []string `yaml:"path_policy"`
	// CCParams are per-algorithm tunables passed to cc.New, by CC name.
	CCParams map[string]map[string]string `yaml:"cc_params"`
}

// StopConfig bounds a run. A run ends when every finite flow has completed
// or at Time, whichever is first.
type StopConfig struct {
	// Time is the virtual-time limit; default 100ms.
	Time Duration `yaml:"time" json:"time"`
	// MaxEvents caps simulator events (0: no cap), a guard against
	// runaway specs.
	MaxEvents int64 `yaml:"max_events" json:"max_events,omitempty"`
}

// SampleConfig says what to record over time for plots.
type SampleConfig struct {
	// Interval is the sampling period; default 10us. Runs keep at most
	// MaxPoints points per series, averaging (queues: taking the maximum
	// of) neighbouring samples when a run is longer.
	Interval Duration `yaml:"interval" json:"interval"`
	// Queues, Paths and CC select switch queue depths, per-path
	// throughput and per-path window/rate; each defaults to true.
	Queues *bool `yaml:"queues" json:"queues"`
	Paths  *bool `yaml:"paths" json:"paths"`
	CC     *bool `yaml:"cc" json:"cc"`
	// TopQueues keeps that many switch queues (the deepest); default 4.
	TopQueues int `yaml:"top_queues" json:"top_queues"`
}

// Size is a byte count written with a unit ("64KiB", "4MB", "4096").
type Size = units.Bytes

// Rate is a bit rate written with a unit ("100Gbps").
type Rate = units.BitRate

// Duration is a time span written with a unit ("50us", "1.5ms").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// parseDuration reads a non-negative duration with a unit.
func parseDuration(s string) (Duration, error) {
	t := strings.TrimSpace(s)
	if t == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, errString("want a duration with a unit (ns, us, ms, s), e.g. 50us")
	}
	if d < 0 {
		return 0, errString("must not be negative")
	}
	return Duration(d), nil
}

// HostSet is a set of host ids written as a list ([0, 1, 2]), a range
// string ("1-7"), a comma list of ids and ranges ("0,2,4-6") or "all". The
// empty set means "not given". IDs are kept sorted and unique.
type HostSet struct {
	All bool
	IDs []int
}

// MarshalJSON writes the set in its canonical string form.
func (h HostSet) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(h.String())), nil }

// IsZero reports whether the set was not given (for omitempty-like checks).
func (h HostSet) IsZero() bool { return !h.All && len(h.IDs) == 0 }

// String formats the set canonically ("all", "0-3,7").
func (h HostSet) String() string {
	if h.All {
		return "all"
	}
	var b strings.Builder
	for i := 0; i < len(h.IDs); {
		j := i
		for j+1 < len(h.IDs) && h.IDs[j+1] == h.IDs[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(h.IDs[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(h.IDs[j]))
		}
		i = j + 1
	}
	return b.String()
}

// Size distributions.
const (
	DistFixed     = "fixed"
	DistUniform   = "uniform"
	DistLognormal = "lognormal"
	DistCDF       = "cdf"
)

// SizeDist is a flow-size distribution. Written as a plain size ("4MiB") it
// is fixed; as a mapping it names a distribution:
//
//	size: {dist: uniform, min: 1MiB, max: 16MiB}
//	size: {dist: lognormal, median: 8MiB, sigma: 0.5, max: 64MiB}
//	size: {dist: cdf, cdf: websearch}
type SizeDist struct {
	Dist   string  `yaml:"dist" json:"dist,omitempty"`
	Value  Size    `yaml:"-" json:"value,omitempty"`
	Min    Size    `yaml:"min" json:"min,omitempty"`
	Max    Size    `yaml:"max" json:"max,omitempty"`
	Median Size    `yaml:"median" json:"median,omitempty"`
	Sigma  float64 `yaml:"sigma" json:"sigma,omitempty"`
	CDF    string  `yaml:"cdf" json:"cdf,omitempty"`

	CDFData []CDFPoint `yaml:"-" json:"cdf_data,omitempty"`
}

// IsZero reports whether no size was given.
func (s SizeDist) IsZero() bool { return s.Dist == "" }

// errString is a constant error message.
type errString string

func (e errString) Error() string { return string(e) }
