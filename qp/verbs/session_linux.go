//go:build linux && cgo

package verbs

import (
	"context"
	"fmt"
	"runtime"

	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
	"github.com/mptx-dev/mptx/units"
)

// Usable reports why OpenHost(cfg) would find no NIC to open: nil when it
// would (some device port is ACTIVE with a RoCEv2 GID, or every device cfg
// names is), else an error wrapping ErrNoDevice (and qp.ErrNotSupported)
// or naming the problem with cfg.Devices. It opens devices only to query
// them (Devices) and allocates nothing.
func Usable(cfg HostConfig) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	devs, err := Devices()
	if err != nil {
		return err
	}
	_, err = chooseNICs(devs, cfg.Devices, cfg.GIDIndex)
	return err
}

// Session-mode routes: the frames of the verbs connection on a control
// channel shared with the layer above (bootstrap.Mux).
var (
	senderTypes   = []bootstrap.Type{bootstrap.TypeResetAck, bootstrap.TypeTransferAck, bootstrap.TypeReceipt}
	receiverTypes = []bootstrap.Type{bootstrap.TypeResetPath, bootstrap.TypeTransfer}
)

// ctlDepth is how many control frames of the verbs connection its Inbox
// holds (at most one ResetPath per path is outstanding).
const ctlDepth = 64

// DialSession sets the sender's queue pairs up over an established,
// authenticated control channel that the layer above (an mptx session)
// owns and shares, instead of dialing one of its own as Dial does. The
// exchange is Dial's (the bootstrap's Offer, Accept, Ready, read from
// mux.Session() directly, so mux must not be started yet), and then the
// connection registers with mux for its control frames (ResetAck; and
// TransferAck and Receipt, for Announce and AwaitReceipt): start mux once
// every consumer is registered, and before the connection is used.
//
// Differences from Dial: cfg.Size is ignored (the receiver advertises
// the region it has, all of which the connection may write); the connection sends Ready only after the RTT
// probes went through on every path, so a receiver that gets Ready knows
// the paths work; on failure DialSession sends nothing more (no Abort:
// the layer above decides between giving up and falling back to another
// transport) and closes nothing of the channel's. A receiver's
// application frame where its Accept was expected fails DialSession with
// a *bootstrap.FrameError carrying it. Close leaves the channel open.
func (h *Host) DialSession(ctx context.Context, mux *bootstrap.Mux, cfg DialConfig) (*Conn, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := h.checkOpen(); err != nil {
		return nil, err
	}
	if cfg.Send.h != h {
		return nil, fmt.Errorf("verbs: DialConfig.Send belongs to another Host")
	}
	nics, err := h.pickNICs(cfg.NICs, cfg.Send.NUMANode())
	if err != nil {
		return nil, err
	}
	c := &Conn{h: h, cfg: cfg, sess: mux.Session(), nt: newNotifier()}
	c.cfg.Size = 0 // the receiver's region decides; any size of it is fine
	if err := c.setup(ctx, nics); err != nil {
		c.teardown()
		return nil, err
	}
	if c.in, err = mux.Route(ctlDepth, senderTypes...); err != nil {
		c.teardown()
		return nil, err
	}
	if !h.trackConn(c, c.Close) {
		c.teardown()
		return nil, fmt.Errorf("verbs: host closed during DialSession")
	}
	c.cleanup = runtime.AddCleanup(c, leakedAll, c.nodes)
	return c, nil
}

// AcceptSession sets the receiver's side up over an established,
// authenticated control channel that the layer above owns and shares: it
// reads the sender's Offer from mux.Session() (so mux must not be started
// yet), creates one RC QP per offered path on the matching NIC, exposes
// the whole of region to them (cfg.Access, as Listener.Accept does) and
// answers with Accept; it returns once the sender's Ready arrived (the
// sender's probes went through on every path). The Receiver then
// registers with mux for its control frames (ResetPath, Transfer): start
// mux once every consumer is registered.
//
// region is registered memory of this host (Alloc, or Register for the
// caller's own memory: zero-copy, registered once), advertised whole for
// the connection's lifetime; the Receiver does not free it. Of cfg, the
// fields used are NICs, QP, Access, SRQDepth, Clock, and HandshakeTimeout
// (bounding the wait for Offer and for Ready); Secret must be set (it is
// checked, as by Listen) though the channel is already authenticated.
//
// On failure AcceptSession sends nothing more (no Abort: the layer above
// decides) and frees what it created; the sender's application frame
// where its Offer or Ready was expected fails it with a
// *bootstrap.FrameError carrying the frame. Close leaves the channel
// open.
func (h *Host) AcceptSession(ctx context.Context, mux *bootstrap.Mux, region *Buffer, cfg ListenConfig) (*Receiver, error) {
	if region == nil || region.h != h {
		return nil, fmt.Errorf("verbs: AcceptSession: the region must be a Buffer of this Host (Alloc or Register)")
	}
	cfg, err := cfg.withDefaults(region.Len())
	if err != nil {
		return nil, err
	}
	if err := h.checkOpen(); err != nil {
		return nil, err
	}
	nics, err := h.pickNICs(cfg.NICs, -1)
	if err != nil {
		return nil, err
	}
	if cfg.Access == AccessMemoryWindow {
		for _, n := range nics {
			if !windowsConfine(n) {
				return nil, fmt.Errorf("verbs: ListenConfig.Access = memory-window but %s's windows cannot confine a peer (%s); use AccessAuto or AccessMR", n.dev.Name, windowProblem(n))
			}
		}
	}
	sess := mux.Session()
	octx, cancel := context.WithTimeout(ctx, cfg.HandshakeTimeout)
	offer, err := sess.RecvOffer(octx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("verbs: waiting for the sender's Offer: %w", err)
	}
	r := &Receiver{h: h, cfg: cfg, sess: sess, offer: offer, region: region, size: uint64(region.Len()), nt: newNotifier()}
	if units.Bytes(r.size) > units.MaxBytes {
		return nil, fmt.Errorf("verbs: region of %d bytes (valid: up to %d)", r.size, int64(units.MaxBytes))
	}
	if err := r.connect(ctx, nics); err != nil {
		r.teardown()
		return nil, err
	}
	if r.in, err = mux.Route(ctlDepth, receiverTypes...); err != nil {
		r.teardown()
		return nil, err
	}
	r.startControl(context.Background())
	if !h.trackConn(r, r.Close) {
		r.teardown()
		return nil, fmt.Errorf("verbs: host closed during AcceptSession")
	}
	r.cleanup = runtime.AddCleanup(r, leakedAll, r.nodes)
	return r, nil
}
