package mptx

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/tcp"
	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
)

// dialTCP connects the sender's TCP paths to the receiver's data port
// (dataAddr ":port" from Welcome, on the host of the control address addr
// unless a path names its own Remote) and returns the connection and its
// send buffer.
func dialTCP(ctx context.Context, addr, dataAddr string, cfg *Config) (qp.Conn, []byte, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("mptx: control address %q: %w", addr, err)
	}
	_, port, err := net.SplitHostPort(dataAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("mptx: the receiver's data address %q: %w", dataAddr, err)
	}
	paths := make([]tcp.PathConfig, cfg.paths())
	for i := range paths {
		var p TCPPath
		if i < len(cfg.TCP.Paths) {
			p = cfg.TCP.Paths[i]
		}
		h := host
		if p.Remote != "" {
			h = p.Remote
		}
		paths[i] = tcp.PathConfig{Remote: net.JoinHostPort(h, port), Interface: p.Interface, LineRate: p.LineRate, NIC: p.NIC}
		if p.Local != "" {
			a, err := netip.ParseAddr(p.Local)
			if err != nil {
				return nil, nil, fmt.Errorf("mptx: Config.TCP.Paths[%d].Local = %q: %w", i, p.Local, err)
			}
			paths[i].Local = a
		}
	}
	send := make([]byte, cfg.SendBuffer)
	c, err := tcp.Dial(ctx, net.JoinHostPort(host, port), tcp.DialConfig{Secret: cfg.Secret, Paths: paths, SendRegion: send, RetryTimeout: cfg.TCP.RetryTimeout})
	if err != nil {
		return nil, nil, fmt.Errorf("mptx: connecting the TCP paths: %w", err)
	}
	return c, send, nil
}

// tcpReceiver is a session's qp/tcp Receiver with its data listener, which
// stays open while the session lives: a path that the sender fences or
// brings back (tcp.Conn.Reset) rejoins through it. Close closes both.
type tcpReceiver struct {
	*tcp.Receiver
	ln *tcp.Listener
}

func (r *tcpReceiver) Close() error {
	err := r.Receiver.Close()
	r.ln.Close()
	return err
}

// acceptTCP opens a data listener for this session alone (so its paths
// cannot be confused with another session's), tells the sender its port
// (Welcome) and accepts the sender's paths into region. The listener
// stays open for the paths' rejoins until the Receiver is closed.
func acceptTCP(ctx context.Context, bs *bootstrap.Session, paths int, region []byte, cfg *Config) (qp.Receiver, error) {
	host, _, err := net.SplitHostPort(bs.LocalAddr().String())
	if err != nil {
		return nil, err
	}
	ln, err := tcp.Listen(net.JoinHostPort(host, "0"), tcp.ListenConfig{Secret: cfg.Secret, RetryTimeout: cfg.TCP.RetryTimeout, MaxPending: paths + 8})
	if err != nil {
		return nil, fmt.Errorf("mptx: data listener: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			ln.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	w := welcome{Transport: transportTCP, DataAddr: net.JoinHostPort("", port), RegionSize: uint64(len(region))}
	if err := bs.WriteApp(ctx, msgWelcome, w.marshal()); err != nil {
		return nil, fmt.Errorf("mptx: sending Welcome: %w", err)
	}
	r, err := ln.Accept(ctx, region)
	if err != nil {
		return nil, fmt.Errorf("mptx: accepting the sender's %d TCP paths on port %s: %w", paths, port, err)
	}
	if n := len(r.Paths()); n != paths {
		r.Close()
		return nil, fmt.Errorf("mptx: the sender connected %d TCP paths, its Hello said %d", n, paths)
	}
	ok = true
	return &tcpReceiver{Receiver: r, ln: ln}, nil
}

// verbsUsable reports whether this host could run a session over verbs.
// Sessions over verbs are not wired yet (the verbs backend sets its queue
// pairs up over its own bootstrap exchange), so auto always means TCP.
func verbsUsable() bool { return false }

func dialVerbs(context.Context, *bootstrap.Session, *Config) (qp.Conn, []byte, error) {
	return nil, nil, errVerbsUnsupported
}

func acceptVerbs(context.Context, *bootstrap.Session, []byte, *Config) (qp.Receiver, error) {
	return nil, errVerbsUnsupported
}
