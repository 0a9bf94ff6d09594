package verbs

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// Tests of the portable parts: they run everywhere, with or without
// rdma-core and devices.

func TestQPConfigDefaults(t *testing.T) {
	c, err := QPConfig{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	want := QPConfig{MaxSendWR: 256, Timeout: ackTimeout(14), RetryCount: 7, RNRRetry: 7, MinRNRTimer: 640 * time.Microsecond, HopLimit: 64}
	if c != want {
		t.Errorf("QPConfig{}.withDefaults() = %+v, want %+v", c, want)
	}
	if got := timeoutExp(c.Timeout); got != 14 {
		t.Errorf("timeoutExp(default) = %d, want 14", got)
	}
	if got := rnrCode(c.MinRNRTimer); got != 12 {
		t.Errorf("rnrCode(default) = %d, want 12", got)
	}
}

func TestQPConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		c    QPConfig
		want string
	}{
		{QPConfig{MaxSendWR: -1}, "MaxSendWR = -1, want 1..1048576"},
		{QPConfig{RetryCount: 8}, "RetryCount = 8, want 1..7"},
		{QPConfig{RNRRetry: 9}, "RNRRetry = 9, want 1..7"},
		{QPConfig{MTU: 1500}, "MTU = 1500, want 256, 512, 1024, 2048 or 4096"},
		{QPConfig{Timeout: 3 * time.Hour}, "Timeout = 3h0m0s"},
		{QPConfig{MinRNRTimer: time.Second}, "MinRNRTimer = 1s"},
		{QPConfig{MaxInline: 5000}, "MaxInline = 5000"},
	} {
		_, err := tc.c.withDefaults()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v.withDefaults() = %v, want an error containing %q", tc.c, err, tc.want)
		}
	}
}

func TestTimeoutExp(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want uint8
	}{
		{1, 1}, {8192 * time.Nanosecond, 1}, {8193 * time.Nanosecond, 2},
		{67 * time.Millisecond, 14}, {68 * time.Millisecond, 15}, {time.Hour, 30}, {3 * time.Hour, 31},
	} {
		if got := timeoutExp(tc.d); got != tc.want {
			t.Errorf("timeoutExp(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
	if got := ackTimeout(14); got != 67108864*time.Nanosecond {
		t.Errorf("ackTimeout(14) = %v, want 67.108864ms (4.096 µs × 2^14)", got)
	}
}

func TestRNRCode(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want uint8
	}{
		{time.Nanosecond, 1}, {10 * time.Microsecond, 1}, {11 * time.Microsecond, 2},
		{640 * time.Microsecond, 12}, {641 * time.Microsecond, 13},
		{491520 * time.Microsecond, 31}, {600 * time.Millisecond, 0},
	} {
		if got := rnrCode(tc.d); got != tc.want {
			t.Errorf("rnrCode(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestMTUEnum(t *testing.T) {
	for e := 1; e <= 5; e++ {
		if got := mtuEnum(mtuBytes(e)); got != e {
			t.Errorf("mtuEnum(mtuBytes(%d)) = %d", e, got)
		}
	}
	if mtuBytes(5) != 4096 || mtuBytes(0) != 0 || mtuEnum(1500) != 0 {
		t.Errorf("mtuBytes(5) = %d, mtuBytes(0) = %d, mtuEnum(1500) = %d; want 4096, 0, 0", mtuBytes(5), mtuBytes(0), mtuEnum(1500))
	}
}

func TestPathMTU(t *testing.T) {
	for _, tc := range []struct {
		local  units.Bytes
		remote uint32
		cap    units.Bytes
		want   units.Bytes
	}{
		{4096, 4096, 0, 4096}, {4096, 1024, 0, 1024}, {1024, 4096, 0, 1024}, {4096, 4096, 2048, 2048},
	} {
		got, err := pathMTU(tc.local, tc.remote, tc.cap)
		if err != nil || got != tc.want {
			t.Errorf("pathMTU(%d, %d, %d) = %d, %v; want %d", tc.local, tc.remote, tc.cap, got, err, tc.want)
		}
	}
	if _, err := pathMTU(4096, 1500, 0); err == nil {
		t.Error("pathMTU(4096, 1500, 0) succeeded; want an error (1500 is no IB MTU)")
	}
}

func TestConfigErrorsNameField(t *testing.T) {
	if _, err := (DialConfig{Secret: []byte("short")}).withDefaults(); err == nil || !strings.Contains(err.Error(), "Secret is 5 bytes, want at least 16") {
		t.Errorf("DialConfig short secret: %v", err)
	}
	if _, err := (DialConfig{Secret: make([]byte, 16)}).withDefaults(); err == nil || !strings.Contains(err.Error(), "DialConfig.Send is nil") {
		t.Errorf("DialConfig nil Send: %v", err)
	}
	if _, err := (ListenConfig{Secret: make([]byte, 16), SRQDepth: 3}).withDefaults(units.MiB); err == nil || !strings.Contains(err.Error(), "SRQDepth = 3, want 16..") {
		t.Errorf("ListenConfig SRQDepth: %v", err)
	}
	for _, c := range []struct {
		cfg  ListenConfig
		want string
	}{
		{ListenConfig{HandshakeTimeout: -time.Second}, "HandshakeTimeout = -1s"},
		{ListenConfig{MaxPending: 1 << 17}, "MaxPending = 131072"},
		{ListenConfig{MaxPending: 4, MaxPendingPerSource: 5}, "MaxPendingPerSource = 5"},
	} {
		c.cfg.Secret = make([]byte, 16)
		if _, err := c.cfg.withDefaults(units.MiB); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ListenConfig %+v: %v; want an error naming %q", c.cfg, err, c.want)
		}
	}
	lc, err := (ListenConfig{Secret: make([]byte, 16), MaxPending: 4}).withDefaults(units.MiB)
	if err != nil || lc.HandshakeTimeout != bootstrap.DefaultHandshakeTimeout || lc.MaxPendingPerSource != 4 {
		t.Errorf("ListenConfig defaults = %+v, %v; want HandshakeTimeout %v, MaxPendingPerSource 4 (capped by MaxPending)", lc, err, bootstrap.DefaultHandshakeTimeout)
	}
	if _, err := (HostConfig{PoolSize: -1}).withDefaults(); err == nil || !strings.Contains(err.Error(), "PoolSize = -1") {
		t.Errorf("HostConfig PoolSize: %v", err)
	}
	c, err := (HostConfig{}).withDefaults()
	if err != nil || c.PoolSize != 64*units.MiB {
		t.Errorf("HostConfig{}.withDefaults() = %+v, %v; want a 64 MiB pool", c, err)
	}
}

func TestAllocator(t *testing.T) {
	a := newAllocator(64<<10, 4096)
	x, err := a.alloc(5000) // rounds to 8 KiB
	if err != nil || x != 0 {
		t.Fatalf("alloc(5000) = %d, %v", x, err)
	}
	y, _ := a.alloc(4096)
	z, _ := a.alloc(4096)
	if y != 8192 || z != 12288 {
		t.Fatalf("offsets %d %d, want 8192 12288", y, z)
	}
	if got := a.inUse(); got != 16384 {
		t.Errorf("inUse = %d, want 16384", got)
	}
	a.release(y)
	a.release(x) // coalesces with y's range
	big, err := a.alloc(12288)
	if err != nil || big != 0 {
		t.Fatalf("alloc(12 KiB) after freeing [0, 12 KiB) = %d, %v; want 0 (coalesced)", big, err)
	}
	a.release(big)
	a.release(z)
	if len(a.free) != 1 || a.free[0] != (span{0, 64 << 10}) {
		t.Fatalf("free list after freeing everything = %v, want one span of the whole pool", a.free)
	}
	if _, err := a.alloc(128 << 10); err == nil || !strings.Contains(err.Error(), "largest free 65536") {
		t.Errorf("alloc beyond the pool: %v", err)
	}
	if _, err := a.alloc(0); err == nil {
		t.Error("alloc(0) succeeded")
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "BUG") {
			t.Errorf("double free: recover() = %v, want a BUG panic", r)
		}
	}()
	a.release(z)
}

func TestFlowLabel(t *testing.T) {
	// Observed on the wire in the VM (TestVMFlowEntropy): rxe QPs 0x27 ↔
	// 0x27 send from UDP port 50673, which is rdma_flow_label_to_udp_sport
	// of rdma_calc_flow_label(0x27, 0x27) = 0x5f1.
	if fl := flowLabel(0x27, 0x27); fl != 0x5f1 {
		t.Errorf("flowLabel(0x27, 0x27) = %#x, want 0x5f1", fl)
	}
	if sp := flowLabelSport(0x5f1); sp != 50673 {
		t.Errorf("flowLabelSport(0x5f1) = %d, want 50673", sp)
	}
	if sp := flowLabelSport(0xFFFFF); sp < 0xC000 {
		t.Errorf("flowLabelSport(0xfffff) = %d, want in the RoCE range >= 0xC000", sp)
	}
	if fl := flowLabel(0, 5); fl != 1 {
		t.Errorf("flowLabel(0, 5) = %d, want 1 (never 0: 0 means no label)", fl)
	}
	if sp := srcPort(0x27, 0); sp != rxeSport(0x27) {
		t.Errorf("srcPort without a label = %d, want rxe's QPN hash %d", sp, rxeSport(0x27))
	}
}

func TestPathFlowLabelsDistinct(t *testing.T) {
	// Identical QPN pairs would hash to one port; the labels must still
	// give every path its own UDP source port.
	lq := []uint32{7, 7, 7, 7, 0x100, 0x200}
	rq := []uint32{9, 9, 9, 9, 0x300, 0x300}
	fls := pathFlowLabels(lq, rq)
	seen := map[uint16]bool{}
	for i, fl := range fls {
		if fl == 0 || fl > flowLabelMask {
			t.Errorf("path %d: flow label %#x out of range", i, fl)
		}
		sp := flowLabelSport(fl)
		if seen[sp] {
			t.Errorf("path %d: UDP source port %d repeats", i, sp)
		}
		seen[sp] = true
	}
	if fls[0] != flowLabel(7, 9) {
		t.Errorf("first path's label %#x, want the kernel's %#x", fls[0], flowLabel(7, 9))
	}
}

func TestTimestampConversion(t *testing.T) {
	// 1 GHz device clock (1e6 kHz): one cycle per ns.
	c := newRawConv(1_000_000, 0xFFFF_FFFF, 1000, vtime.Time(5_000_000))
	if got := c.at(1000 + 250); got != vtime.Time(5_000_250) {
		t.Errorf("raw at(+250 cycles) = %d, want 5000250", got)
	}
	if got := c.at(900); got != vtime.Time(4_999_900) {
		t.Errorf("raw at(-100 cycles) = %d, want 4999900", got)
	}
	// Wrap of a 32-bit counter: base near the top, stamp past zero.
	w := newRawConv(500_000, 0xFFFF_FFFF, 0xFFFF_FF00, vtime.Time(1_000_000))
	if got := w.at(0x100); got != vtime.Time(1_000_000+2*0x200) {
		t.Errorf("raw at(wrapped) = %d, want %d (0x200 cycles at 500 MHz)", got, 1_000_000+2*0x200)
	}
	start := time.Unix(1700000000, 0)
	wc := newWallConv(start, vtime.Time(42))
	if got := wc.at(uint64(start.Add(time.Millisecond).UnixNano())); got != vtime.Time(42+1_000_000) {
		t.Errorf("wallclock at(+1ms) = %d, want %d", got, 42+1_000_000)
	}
	var none tsConv
	if none.at(12345) != 0 {
		t.Error("zero tsConv converted a stamp; want 0 (unknown)")
	}
}

var testDevs = []Device{
	{Name: "mlx5_1", NUMANode: 1, Ports: []Port{{Num: 1, State: "ACTIVE", LinkLayer: "Ethernet", ActiveMTU: 4096, Speed: 100 * units.Gbps, Netdev: "ens2",
		GIDs: []GID{gid(0, GIDRoCEv2, "fe80::1", "ens2"), gid(3, GIDRoCEv2, "10.0.1.5", "ens2")}}}},
	{Name: "mlx5_0", NUMANode: 0, Ports: []Port{{Num: 1, State: "ACTIVE", LinkLayer: "Ethernet", ActiveMTU: 4096, Speed: 100 * units.Gbps, Netdev: "ens1",
		GIDs: []GID{gid(0, GIDRoCEv1, "fe80::2", "ens1"), gid(1, GIDRoCEv2, "fe80::2", "ens1"), gid(2, GIDRoCEv2, "10.0.0.5", "ens1")}}}},
	{Name: "rxe9", NUMANode: -1, Ports: []Port{{Num: 1, State: "DOWN", LinkLayer: "Ethernet", ActiveMTU: 1024, Netdev: "eth9",
		GIDs: []GID{gid(1, GIDRoCEv2, "10.9.9.9", "eth9")}}}},
}

func gid(i int, typ GIDType, addr, netdev string) GID {
	a := netip.MustParseAddr(addr)
	if a.Is4() {
		a = netip.AddrFrom16(a.As16())
	}
	return GID{Index: i, Type: typ, Raw: a.As16(), Addr: a.Unmap(), Netdev: netdev}
}

func TestWriteTable(t *testing.T) {
	var sb strings.Builder
	if err := WriteTable(&sb, testDevs); err != nil {
		t.Fatal(err)
	}
	want := `DEVICE  PORT  STATE   LINK      MTU   SPEED    NETDEV  NUMA  GID  TYPE     ADDRESS
mlx5_0  1     ACTIVE  Ethernet  4096  100Gbps  ens1    0     1    RoCE v2  fe80::2
mlx5_0  1     ACTIVE  Ethernet  4096  100Gbps  ens1    0     2    RoCE v2  10.0.0.5
mlx5_1  1     ACTIVE  Ethernet  4096  100Gbps  ens2    1     0    RoCE v2  fe80::1
mlx5_1  1     ACTIVE  Ethernet  4096  100Gbps  ens2    1     3    RoCE v2  10.0.1.5
rxe9    1     DOWN    Ethernet  1024  -        eth9    -     1    RoCE v2  10.9.9.9
`
	if got := sb.String(); got != want {
		t.Errorf("WriteTable =\n%s\nwant\n%s", got, want)
	}
}

func TestPickGID(t *testing.T) {
	p := testDevs[1].Ports[0]
	if g, ok := p.PickGID(0); !ok || g.Index != 2 {
		t.Errorf("PickGID(auto) = %+v, want index 2 (the IPv4 RoCEv2 GID)", g)
	}
	if g, ok := p.PickGID(1); !ok || g.Index != 1 {
		t.Errorf("PickGID(1) = %+v, want index 1", g)
	}
	if _, ok := p.PickGID(7); ok {
		t.Error("PickGID(7) found a GID that does not exist")
	}
}

func TestChooseNICs(t *testing.T) {
	got, err := chooseNICs(testDevs, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got {
		names = append(names, c.Dev.Name+"/"+c.GID.Addr.String())
	}
	if want := []string{"mlx5_0/10.0.0.5", "mlx5_1/10.0.1.5"}; !reflect.DeepEqual(names, want) {
		t.Errorf("chooseNICs(auto) = %v, want %v (active ports only, by name)", names, want)
	}
	if got, err := chooseNICs(testDevs, []string{"mlx5_1:1"}, 0); err != nil || len(got) != 1 || got[0].GID.Index != 3 {
		t.Errorf("chooseNICs(mlx5_1:1) = %+v, %v", got, err)
	}
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{[]string{"nope"}, `device "nope" not found; available: mlx5_1:1 ACTIVE`},
		{[]string{"rxe9"}, "rxe9 port 1 is DOWN, not ACTIVE"},
		{[]string{"mlx5_0:2"}, "has no port 2"},
		{[]string{"mlx5_0:x"}, `port "x", want 1..255`},
		{[]string{"mlx5_0", "mlx5_0:1"}, "listed twice"},
	} {
		_, err := chooseNICs(testDevs, tc.names, 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("chooseNICs(%v) = %v, want an error containing %q", tc.names, err, tc.want)
		}
	}
	if _, err := chooseNICs(nil, nil, 0); !errors.Is(err, ErrNoDevice) || !errors.Is(err, qp.ErrNotSupported) {
		t.Errorf("chooseNICs(no devices) = %v, want ErrNoDevice wrapping qp.ErrNotSupported", err)
	}
}

func TestPreferLocal(t *testing.T) {
	for _, tc := range []struct {
		numa []int
		node int
		want []int
	}{
		{[]int{0, 1, 0, 1}, 1, []int{1, 3}}, // several nodes: local ones only
		{[]int{0, 1, 0, 1}, 0, []int{0, 2}}, //
		{[]int{0, 0}, 1, []int{0, 1}},       // one node: all
		{[]int{-1, -1}, 0, []int{0, 1}},     // unknown (rxe): all
		{[]int{0, 1}, -1, []int{0, 1}},      // buffer's node unknown: all
		{[]int{0, 1, 2}, 3, []int{0, 1, 2}}, // no NIC on the buffer's node: all
		{[]int{-1, 1, 0}, 0, []int{2}},      // unknown NICs are not local
	} {
		if got := preferLocal(tc.numa, tc.node); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("preferLocal(%v, %d) = %v, want %v", tc.numa, tc.node, got, tc.want)
		}
	}
}

func TestErrorText(t *testing.T) {
	err := verbError("ibv_reg_mr", "rxe0", syscall.ENOMEM)
	want := "verbs: ibv_reg_mr(rxe0): cannot allocate memory (errno 12): RLIMIT_MEMLOCK too low? raise it with ulimit -l (or LimitMEMLOCK=infinity in the unit) or run as root"
	if err.Error() != want {
		t.Errorf("error text = %q, want %q", err.Error(), want)
	}
	if !errors.Is(err, syscall.ENOMEM) {
		t.Error("errors.Is(err, ENOMEM) = false")
	}
	if errors.Is(err, qp.ErrNotSupported) {
		t.Error("ENOMEM matches qp.ErrNotSupported")
	}
	ns := verbError("ibv_modify_qp_rate_limit", "rxe0", syscall.EOPNOTSUPP)
	if !errors.Is(ns, qp.ErrNotSupported) || !strings.Contains(ns.Error(), "paces in software") {
		t.Errorf("rate-limit EOPNOTSUPP = %v, want qp.ErrNotSupported and the software-pacing remedy", ns)
	}
	if e := (&Error{Verb: "ibv_open_device"}); e.Error() != "verbs: ibv_open_device: failed" || e.Unwrap() != nil {
		t.Errorf("errno-less error = %q, unwrap %v", e.Error(), e.Unwrap())
	}
}

func TestStatusOf(t *testing.T) {
	for st, want := range map[int]qp.Status{0: qp.StatusOK, 5: qp.StatusFlushed, 10: qp.StatusRemoteAccess, 12: qp.StatusRetryExceeded,
		13: qp.StatusRNRRetryExceeded, 4: qp.StatusLocal, 2: qp.StatusLocal, 21: qp.StatusFatal, 99: qp.StatusFatal} {
		if got := statusOf(st); got != want {
			t.Errorf("statusOf(%d) = %v, want %v", st, got, want)
		}
	}
	if wcStatusString(12) != "transport retry counter exceeded" || wcStatusString(77) != "status 77" {
		t.Errorf("wcStatusString: %q, %q", wcStatusString(12), wcStatusString(77))
	}
}

func TestParseRate(t *testing.T) {
	for s, want := range map[string]units.BitRate{
		"10 Gb/sec (1X FDR10)": 10 * units.Gbps, "100 Gb/sec (2X HDR)": 100 * units.Gbps, "2.5 Gb/sec (1X SDR)": 2500 * units.Mbps, "": 0, "garbage": 0,
	} {
		if got := parseRate(s); got != want {
			t.Errorf("parseRate(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestCounters(t *testing.T) {
	dir := t.TempDir()
	old := sysfsRoot
	sysfsRoot = dir
	defer func() { sysfsRoot = old }()
	hc := filepath.Join(dir, "mlx5_0", "ports", "1", "hw_counters")
	if err := os.MkdirAll(hc, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"np_ecn_marked_roce_packets": "17\n", "rp_cnp_handled": "5\n", "local_ack_timeout_err": "2\n", "packet_seq_err": "3\n"} {
		if err := os.WriteFile(filepath.Join(hc, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pc, err := openPortCounters("mlx5_0", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.close()
	c, err := pc.read()
	if err != nil || c != (qp.Counters{ECNMarked: 17, CNPReceived: 5, Retransmits: 5}) {
		t.Errorf("read = %+v, %v; want ECN 17, CNP 5, retransmits 2+3", c, err)
	}
	if err := os.WriteFile(filepath.Join(hc, "rp_cnp_handled"), []byte("6\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, _ := pc.read(); c.CNPReceived != 6 {
		t.Errorf("after the counter moved: CNPReceived = %d, want 6 (re-read, not cached)", c.CNPReceived)
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = pc.read() }); a != 0 {
		t.Errorf("reading counters allocates %.1f times, want 0", a)
	}
	// rxe has none of the congestion counters: zeros, not an error.
	rxe := filepath.Join(dir, "rxe0", "ports", "1", "hw_counters")
	os.MkdirAll(rxe, 0o755)
	os.WriteFile(filepath.Join(rxe, "completer_retry_err"), []byte("9\n"), 0o644)
	rc, err := openPortCounters("rxe0", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.close()
	if c, err := rc.read(); err != nil || c != (qp.Counters{Retransmits: 9}) || len(rc.ecn) != 0 || len(rc.cnp) != 0 {
		t.Errorf("rxe counters = %+v, %v; want only Retransmits 9 and no ECN/CNP files", c, err)
	}
}

// fakeObj stands for a verbs wrapper in the tree tests.
type fakeObj struct{ n *node }

func TestTreeCloseOrder(t *testing.T) {
	var order []string
	rec := func(name string, err error) func() error {
		return func() error { order = append(order, name); return err }
	}
	root := newNode(nil, "context", "dev", rec("context", nil))
	pd := newNode(root, "PD", "dev", rec("pd", nil))
	mr := newNode(pd, "MR", "a", rec("mr-a", nil))
	newNode(pd, "QP", "1", rec("qp-1", errors.New("busy")))
	newNode(pd, "MR", "b", rec("mr-b", nil))
	if err := mr.close(); err != nil {
		t.Fatal(err)
	}
	err := root.close()
	if err == nil || !strings.Contains(err.Error(), "busy") {
		t.Errorf("root.close() = %v, want the QP's error joined in", err)
	}
	want := []string{"mr-a", "mr-b", "qp-1", "pd", "context"}
	if !reflect.DeepEqual(order, want) {
		t.Errorf("destroy order %v, want %v (children newest first, each once)", order, want)
	}
	order = nil
	if err := root.close(); err == nil || len(order) != 0 {
		t.Errorf("second close = %v after destroying %v; want the first result again and nothing destroyed", err, order)
	}
	for _, l := range liveObjects() {
		if l.Name == "dev" || l.Name == "a" || l.Name == "b" || l.Name == "1" {
			t.Errorf("closed node still live: %+v", l)
		}
	}
	defer func() {
		if r := recover(); r == nil {
			t.Error("newNode under a closed parent did not panic")
		}
	}()
	newNode(pd, "MR", "late", nil)
}

func TestTreeLeakCleanup(t *testing.T) {
	got := make(chan Leak, 2)
	destroyed := make(chan string, 4)
	treeMu.Lock()
	leakHook = func(l Leak) { got <- l }
	treeMu.Unlock()
	defer func() {
		treeMu.Lock()
		leakHook = nil
		treeMu.Unlock()
	}()
	parent := newNode(nil, "PD", "leaky", func() error { destroyed <- "pd"; return nil })
	func() {
		o := &fakeObj{n: newNode(parent, "MR", "leaky", func() error { destroyed <- "mr"; return nil })}
		track(o, o.n)
	}()
	defer parent.close()
	deadline := time.After(10 * time.Second)
	for {
		runtime.GC()
		select {
		case l := <-got:
			if l.Kind != "MR" || !strings.Contains(l.Stack, "TestTreeLeakCleanup") {
				t.Fatalf("leak %+v; want the MR with this test in its creation stack", l)
			}
			if d := <-destroyed; d != "mr" {
				t.Fatalf("the leaked object's cleanup destroyed %q, want the MR", d)
			}
			return
		case <-deadline:
			t.Fatal("the dropped wrapper was never reported")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestCheckAccept: an authenticated receiver's Accept must describe a
// region the sender can address: 2^64-1 bytes (which would make
// Conn.Region's length -1), a region that wraps the address space, too few
// bytes or the wrong number of paths are protocol errors.
func TestCheckAccept(t *testing.T) {
	ok := bootstrap.Accept{RegionAddr: 0x7f0000000000, RegionLen: 4096, Paths: make([]bootstrap.Endpoint, 2)}
	if err := checkAccept(&ok, 4096, 2); err != nil {
		t.Fatalf("checkAccept(%+v) = %v, want nil", ok, err)
	}
	cases := []struct {
		mod  func(a *bootstrap.Accept)
		want string
	}{
		{func(a *bootstrap.Accept) { a.RegionLen = 1<<64 - 1 }, "18446744073709551615-byte region"},
		{func(a *bootstrap.Accept) { a.RegionLen = 1 << 63 }, "9223372036854775808-byte region"},
		{func(a *bootstrap.Accept) { a.RegionAddr = 1<<64 - 4096 }, "wraps the address space"},
		{func(a *bootstrap.Accept) { a.RegionLen = 4095 }, "4095 bytes for a 4096-byte tensor"},
		{func(a *bootstrap.Accept) { a.Paths = a.Paths[:1] }, "1 paths for our 2"},
	}
	for _, c := range cases {
		a := ok
		c.mod(&a)
		err := checkAccept(&a, 4096, 2)
		if !errors.Is(err, bootstrap.ErrProtocol) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("checkAccept(%+v) = %v; want ErrProtocol naming %q", a, err, c.want)
		}
	}
}
