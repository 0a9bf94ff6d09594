//go:build linux && cgo

package mptx

import (
	"context"
	"fmt"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/qp/verbs"
	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
	"github.com/mptx-dev/mptx/units"
	"github.com/mptx-dev/mptx/vtime"
)

// Sessions over verbs: both ends' queue pairs are set up over the
// session's own authenticated control channel (verbs.Host.DialSession and
// AcceptSession), which then carries the session protocol and the verbs
// connection's path resets side by side through a bootstrap.Mux. Memory
// is registered once per session: the sender's send buffer is a range of
// the verbs host's pool, the receiver's region too, or Config.Region
// registered as it is (zero-copy); nothing is registered per tensor.

// appDepth is how many session control frames the Mux queues for the
// session's reader.
const appDepth = 256

// verbsHost returns the verbs host a session uses: Config.Verbs.Host, or
// one of its own (owned: the session closes it) whose pool holds pool
// bytes.
func verbsHost(cfg *Config, pool units.Bytes, huge verbs.HugePolicy) (h *verbs.Host, owned bool, err error) {
	if cfg.Verbs.Host != nil {
		return cfg.Verbs.Host, false, nil
	}
	h, err = verbs.OpenHost(verbs.HostConfig{Devices: cfg.Verbs.Devices, GIDIndex: cfg.Verbs.GIDIndex, PoolSize: pool, HugePages: huge})
	if err != nil {
		return nil, false, err
	}
	return h, true, nil
}

// qpsPerNIC is Config.Verbs.QPsPerNIC, or Config.Paths spread over nics
// NICs, rounded up.
func qpsPerNIC(cfg *Config, nics int) int {
	if q := cfg.Verbs.QPsPerNIC; q > 0 {
		return q
	}
	return min(max((cfg.paths()+nics-1)/max(nics, 1), 1), verbs.MaxQPsPerNIC)
}

// dialVerbs sets the sending end's queue pairs up over bs after the
// receiver's Welcome chose verbs. The send region (the staging buffer and
// the Session.Alloc pool, sendRegionSize) comes from the host's pool. The
// connection uses every NIC, ranked for the send region's memory
// (Host.ChooseNICs), and the engine gets the ranking as path tiers
// (session_tiers.go) unless Config.Engine.Paths is set; a host whose
// topology cannot be read gets every NIC in one tier, NUMA-local first.
func dialVerbs(ctx context.Context, bs *bootstrap.Session, cfg *Config) (link, error) {
	size := sendRegionSize(cfg) // staging, then the pool (session_alloc.go)
	h, owned, err := verbsHost(cfg, size, cfg.Verbs.HugePages)
	if err != nil {
		return link{}, err
	}
	buf, err := h.Alloc(size)
	if err != nil {
		if owned {
			h.Close()
		}
		return link{}, fmt.Errorf("mptx: the send buffer (Config.SendBuffer %v) from the verbs pool: %w", cfg.SendBuffer, err)
	}
	free := func() {
		buf.Free()
		if owned {
			h.Close()
		}
	}
	var nics []string
	choices, err := h.ChooseNICs(verbs.PathQuery{Memory: verbs.Locality{NUMANode: buf.NUMANode()}})
	if err != nil {
		choices = nil // no topology: every NIC, one tier
	}
	for _, c := range choices {
		nics = append(nics, c.Device)
	}
	n := len(nics)
	if n == 0 {
		n = len(h.NICs())
	}
	clock := vtime.NewMonotonic()
	mux := bootstrap.NewMux(bs)
	conn, err := h.DialSession(ctx, mux, verbs.DialConfig{Secret: cfg.Secret, Send: buf, NICs: nics, QPsPerNIC: qpsPerNIC(cfg, n),
		QP: cfg.Verbs.QP, Clock: clock, RTTProbes: cfg.Verbs.RTTProbes})
	if err != nil {
		free()
		return link{}, err
	}
	var paths []multipath.PathConfig
	if choices != nil && len(cfg.Engine.Paths) == 0 {
		if paths, err = TieredPaths(conn.Paths(), choices); err != nil {
			conn.Close()
			free()
			return link{}, err
		}
	}
	l := link{conn: conn, mem: buf.Bytes(), free: free, clock: clock}
	if l.in, err = mux.RouteApp(appDepth); err == nil {
		err = mux.Start()
	}
	if err != nil {
		l.close()
		return link{}, err
	}
	if paths != nil {
		// Only now: a failed set-up may fall back to TCP, whose paths
		// are others.
		cfg.Engine.Paths = paths
	}
	return l, nil
}

// acceptVerbs tells the sender verbs it is (Welcome) and sets the
// receiving end up over bs: the region is Config.Region registered as it
// is (zero-copy), else Config.RegionSize bytes of the host's pool, and the
// sender's queue pairs may write all of it for the session's lifetime. A
// failure before the Welcome wraps errNoWelcome.
func acceptVerbs(ctx context.Context, bs *bootstrap.Session, cfg *Config) (link, error) {
	size := units.Bytes(regionSize(cfg))
	pool, huge := size, cfg.Verbs.HugePages
	if cfg.Region != nil {
		pool, huge = 4096, verbs.HugeNever // the region is the caller's; the pool is unused
	}
	h, owned, err := verbsHost(cfg, pool, huge)
	if err != nil {
		return link{}, fmt.Errorf("%w: %w", errNoWelcome, err)
	}
	var buf *verbs.Buffer
	if cfg.Region != nil {
		buf, err = h.Register(cfg.Region)
	} else {
		buf, err = h.Alloc(size)
	}
	if err != nil {
		if owned {
			h.Close()
		}
		return link{}, fmt.Errorf("%w: the receive region (%v): %w", errNoWelcome, size, err)
	}
	free := func() {
		buf.Free()
		if owned {
			h.Close()
		}
	}
	w := welcome{Transport: transportVerbs, RegionSize: uint64(size)}
	if err := bs.WriteApp(ctx, msgWelcome, w.marshal()); err != nil {
		free()
		return link{}, fmt.Errorf("mptx: sending Welcome: %w", err)
	}
	clock := vtime.NewMonotonic()
	mux := bootstrap.NewMux(bs)
	r, err := h.AcceptSession(ctx, mux, buf, verbs.ListenConfig{Secret: cfg.Secret, QP: cfg.Verbs.QP, Access: cfg.Verbs.Access,
		HandshakeTimeout: cfg.timeout(), Clock: clock})
	if err != nil {
		free()
		return link{}, err
	}
	l := link{recv: r, mem: buf.Bytes(), free: free, clock: clock}
	if l.in, err = mux.RouteApp(appDepth); err == nil {
		err = mux.Start()
	}
	if err != nil {
		l.close()
		return link{}, err
	}
	return l, nil
}
