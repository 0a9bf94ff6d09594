package mptx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/qp/verbs"
	"github.com/mptx-dev/mptx/qp/verbs/bootstrap"
	"github.com/mptx-dev/mptx/units"
)

// The transport choice and the fallback from verbs to TCP, on any host:
// the verbs set-up is replaced by fakes that speak its part of the control
// channel (Welcome for verbs, the bootstrap's Offer and Accept) and fail on
// cue. Real verbs sessions run in the Soft-RoCE VM (test/rxe).

var verbsTestSecret = []byte("0123456789abcdef-verbs-fallback")

// fakeVerbs makes this host look verbs-capable, with dial and accept as
// the two ends' verbs set-up, for the test's duration (the tests that use
// it do not run in parallel).
func fakeVerbs(t *testing.T, dial, accept func(context.Context, *bootstrap.Session, *Config) (link, error)) {
	t.Helper()
	saved := verbsTransport
	t.Cleanup(func() { verbsTransport = saved })
	verbsTransport.usable = func(*Config) error { return nil }
	verbsTransport.dial = dial
	verbsTransport.accept = accept
}

// sessionPair dials a listener on loopback; it returns the sending
// session, or Dial's error, and the receiving session if one was accepted.
func sessionPair(t *testing.T, scfg, rcfg Config) (snd, rcv *Session, err error) {
	t.Helper()
	scfg.Secret, rcfg.Secret = verbsTestSecret, verbsTestSecret
	scfg.SendBuffer, rcfg.RegionSize = 4*units.MiB, 4*units.MiB
	ln, err := Listen("127.0.0.1:0", rcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	snd, err = Dial(ctx, ln.Addr().String(), scfg)
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { snd.Close() })
	rcv, aerr := ln.Accept(ctx)
	if aerr != nil {
		t.Fatalf("Accept: %v", aerr)
	}
	t.Cleanup(func() { rcv.Close() })
	return snd, rcv, nil
}

// shipOne sends one tensor and checks it arrives intact.
func shipOne(t *testing.T, snd, rcv *Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	data := bytes.Repeat([]byte("fallback"), 64<<10)
	errc := make(chan error, 1)
	go func() { errc <- snd.Send(ctx, "t", data) }()
	tn, err := rcv.Recv(ctx)
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	if !bytes.Equal(tn.Data, data) {
		t.Fatal("the tensor arrived changed")
	}
	tn.Release()
	if err := <-errc; err != nil {
		t.Fatalf("Send: %v", err)
	}
}

func sendWelcomeVerbs(ctx context.Context, bs *bootstrap.Session) error {
	w := welcome{Transport: transportVerbs, RegionSize: uint64(4 * units.MiB)}
	return bs.WriteApp(ctx, msgWelcome, w.marshal())
}

// TestAutoFallsBackWhenSenderVerbsFails: the receiver chose verbs and
// waits for the sender's verbs Offer; the sender's verbs set-up fails (no
// path reaches the receiver, say) and it sends NoVerbs instead: both ends
// go on over TCP on the same channel.
func TestAutoFallsBackWhenSenderVerbsFails(t *testing.T) {
	fakeVerbs(t,
		func(context.Context, *bootstrap.Session, *Config) (link, error) {
			return link{}, errors.New("RTT probe on path 1: retry exceeded (fake)")
		},
		func(ctx context.Context, bs *bootstrap.Session, _ *Config) (link, error) {
			if err := sendWelcomeVerbs(ctx, bs); err != nil {
				return link{}, err
			}
			_, err := bs.RecvOffer(ctx)
			if !peerFellBack(err) {
				return link{}, fmt.Errorf("the receiver's verbs set-up got %v, want the sender's NoVerbs", err)
			}
			return link{}, err
		})
	snd, rcv, err := sessionPair(t, Config{}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if snd.Transport() != TransportTCP || rcv.Transport() != TransportTCP {
		t.Fatalf("transports %v / %v after the fallback, want tcp", snd.Transport(), rcv.Transport())
	}
	shipOne(t, snd, rcv)
}

// TestAutoFallsBackWhenReceiverVerbsFails: the receiver sent Welcome for
// verbs and then failed (a region its NIC would not register, say): it
// sends NoVerbs where the sender awaits its Accept, and both ends go on
// over TCP.
func TestAutoFallsBackWhenReceiverVerbsFails(t *testing.T) {
	fakeVerbs(t,
		func(ctx context.Context, bs *bootstrap.Session, _ *Config) (link, error) {
			_, err := bs.RecvAccept(ctx)
			if !peerFellBack(err) {
				return link{}, fmt.Errorf("the sender's verbs set-up got %v, want the receiver's NoVerbs", err)
			}
			return link{}, err
		},
		func(ctx context.Context, bs *bootstrap.Session, _ *Config) (link, error) {
			if err := sendWelcomeVerbs(ctx, bs); err != nil {
				return link{}, err
			}
			return link{}, errors.New("ibv_reg_mr: cannot allocate memory (fake)")
		})
	snd, rcv, err := sessionPair(t, Config{}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if snd.Transport() != TransportTCP || rcv.Transport() != TransportTCP {
		t.Fatalf("transports %v / %v after the fallback, want tcp", snd.Transport(), rcv.Transport())
	}
	shipOne(t, snd, rcv)
}

// TestAutoFallsBackBeforeWelcome: the receiver's verbs set-up fails before
// it told the sender anything (its host would not open): it just welcomes
// the sender to TCP.
func TestAutoFallsBackBeforeWelcome(t *testing.T) {
	fakeVerbs(t,
		func(context.Context, *bootstrap.Session, *Config) (link, error) {
			t.Error("the sender set verbs up though the receiver welcomed it to TCP")
			return link{}, errors.New("unexpected")
		},
		func(context.Context, *bootstrap.Session, *Config) (link, error) {
			return link{}, fmt.Errorf("%w: ibv_open_device: no such device (fake)", errNoWelcome)
		})
	snd, rcv, err := sessionPair(t, Config{}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if snd.Transport() != TransportTCP || rcv.Transport() != TransportTCP {
		t.Fatalf("transports %v / %v, want tcp", snd.Transport(), rcv.Transport())
	}
	shipOne(t, snd, rcv)
}

// TestForcedVerbsFailsWithTheReason: with Transport verbs there is no
// fallback: Dial fails, naming why the verbs set-up failed.
func TestForcedVerbsFailsWithTheReason(t *testing.T) {
	fakeVerbs(t,
		func(context.Context, *bootstrap.Session, *Config) (link, error) {
			return link{}, errors.New("RTT probe on path 0 (rxe0 QP 0x11): retry exceeded (fake)")
		},
		func(ctx context.Context, bs *bootstrap.Session, _ *Config) (link, error) {
			if err := sendWelcomeVerbs(ctx, bs); err != nil {
				return link{}, err
			}
			_, err := bs.RecvOffer(ctx)
			return link{}, err
		})
	_, _, err := sessionPair(t, Config{Transport: TransportVerbs}, Config{})
	if err == nil || !strings.Contains(err.Error(), "setting up the verbs paths") || !strings.Contains(err.Error(), "retry exceeded (fake)") {
		t.Fatalf("Dial with a failing verbs set-up = %v, want an error naming the verbs failure", err)
	}
	t.Logf("Dial: %v", err)
}

// TestForcedVerbsWithoutDevice: on a host that cannot run verbs (this
// machine has no RDMA device), --transport verbs fails at once with one
// line saying why, on either end.
func TestForcedVerbsWithoutDevice(t *testing.T) {
	if verbsUsable(&Config{}) == nil {
		t.Skip("this host can run verbs")
	}
	_, _, err := sessionPair(t, Config{Transport: TransportVerbs}, Config{})
	if err == nil || !strings.Contains(err.Error(), "Config.Transport is verbs, but this host cannot run verbs") ||
		!errors.Is(err, verbs.ErrNoDevice) && !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("Dial(verbs) here = %v, want the reason verbs cannot run", err)
	}
	t.Logf("sender: %v", err)
	_, _, err = sessionPair(t, Config{Transport: TransportTCP}, Config{Transport: TransportVerbs})
	if err == nil || !strings.Contains(err.Error(), "no common transport") || !strings.Contains(err.Error(), "cannot run verbs") {
		t.Fatalf("Dial(tcp) to a verbs-only receiver here = %v, want the receiver's reason", err)
	}
	t.Logf("receiver: %v", err)
}

// TestAutoIsTCPWithoutDevice: auto on a host without a usable device is
// TCP, without any verbs exchange.
func TestAutoIsTCPWithoutDevice(t *testing.T) {
	if verbsUsable(&Config{}) == nil {
		t.Skip("this host can run verbs")
	}
	snd, rcv, err := sessionPair(t, Config{}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if snd.Transport() != TransportTCP || rcv.Transport() != TransportTCP {
		t.Fatalf("transports %v / %v, want tcp", snd.Transport(), rcv.Transport())
	}
}

// TestMemHold: the memory is freed once, after the last holder, and not
// acquired again after.
func TestMemHold(t *testing.T) {
	freed := 0
	h := newMemHold(func() { freed++ })
	if !h.acquire() || !h.acquire() {
		t.Fatal("acquire failed on a held hold")
	}
	h.drop()
	h.drop()
	if freed != 0 {
		t.Fatalf("freed %d times with the session's hold still on", freed)
	}
	h.drop()
	if freed != 1 {
		t.Fatalf("freed %d times after the last drop, want 1", freed)
	}
	if h.acquire() {
		t.Fatal("acquire succeeded after the memory was freed")
	}
	var none *memHold
	if !none.acquire() {
		t.Fatal("a nil hold (Go memory) refused")
	}
	none.drop()
	th := &tensorHold{h: newMemHold(func() { freed++ })}
	th.drop()
	th.drop()
	if freed != 2 {
		t.Fatalf("a tensor's hold dropped twice freed %d times in all, want 2", freed)
	}
}
