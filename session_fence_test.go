package mptx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/units"
)

// TestSessionFencesStalledPath: one of a session's three TCP paths stalls
// (its receiver pauses) far past the engine's stall floor. The engine
// requeues its chunks and fences it: the sender's Reset rejoins the path
// through the session's data listener, which stays open for that, and the
// receiver drops the stalled connection. Every tensor arrives whole, no
// reset fails, and after the stall the path carries tensors again.
func TestSessionFencesStalledPath(t *testing.T) {
	secret := []byte("session fence test: 32 bytes...!")
	ln, err := Listen("127.0.0.1:0", Config{Secret: secret, RegionSize: 64 * units.MiB})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	acc := make(chan *Session, 1)
	go func() {
		s, err := ln.Accept(ctx)
		if err != nil {
			t.Error(err)
		}
		acc <- s
	}()
	snd, err := Dial(ctx, ln.Addr().String(), Config{Secret: secret, Paths: 3,
		Engine: multipath.Config{MinTimeout: 50 * time.Millisecond, QuarantineMin: 2 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	rcv := <-acc
	if rcv == nil {
		t.FailNow()
	}
	defer rcv.Close()
	tr := rcv.rcv.recv.(*tcpReceiver).Receiver
	if err := tr.PausePath(0); err != nil {
		t.Fatal(err)
	}
	send := func(name string, id int) {
		t.Helper()
		data := make([]byte, 16<<20)
		for i := range data {
			data[i] = byte(i*7 + id)
		}
		if err := snd.Send(ctx, name, data); err != nil {
			t.Fatalf("Send(%s): %v", name, err)
		}
		tn, err := rcv.Recv(ctx)
		if err != nil {
			t.Fatalf("Recv(%s): %v", name, err)
		}
		if tn.Name != name || !bytes.Equal(tn.Data, data) {
			t.Fatalf("received %q with other bytes than %q was sent with", tn.Name, name)
		}
		tn.Release()
	}
	send("stalled", 0)
	stats := func() (SenderStats, multipath.PathStats) {
		var st SenderStats
		var ps multipath.PathStats
		done := make(chan struct{})
		if !snd.snd.do(func() { st, ps = snd.snd.snd.Stats(), snd.snd.snd.Engine().Stats(0); close(done) }) {
			t.Fatal("the session ended")
		}
		<-done
		return st, ps
	}
	st, ps := stats()
	if st.Resets == 0 || st.ResetErrors != 0 {
		t.Fatalf("sender stats %+v: want the stalled path fenced (Resets > 0) and no reset failed", st)
	}
	if err := tr.ResumePath(0); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		send(fmt.Sprintf("after-%d", i), i)
	}
	st2, ps2 := stats()
	if st2.ResetErrors != 0 {
		t.Errorf("sender stats after the stall %+v: want no failed reset", st2)
	}
	if ps2.State != multipath.PathUp {
		t.Errorf("path 0 after the stall: %+v; want it up again", ps2)
	}
	t.Logf("stall: %d resets, path 0 %d requeues; after: path 0 %s, %d chunks done", st.Resets, ps.Requeues, ps2.State, ps2.Chunks)
}

// TestSessionChecksumMismatch: a tensor whose bytes change after the
// sender checksummed them (a caller breaking SendAsync's rule) is an error
// at both ends, not data; the session goes on. The receiver's only path is
// paused while SendAsync checksums, so that the tensor's last byte is still
// waiting to be sent when the caller changes it. The tensor is sent from a
// Buffer of the session's pool, which SendAsync checksums on the caller's
// goroutine (from the caller's own memory over TCP, qp/tcp's writers
// checksum the bytes as they send them, session_sum.go: the change then
// reaches the receiver with a sum that covers it).
func TestSessionChecksumMismatch(t *testing.T) {
	secret := []byte("session crc test: 32 bytes......!")
	ln, err := Listen("127.0.0.1:0", Config{Secret: secret, RegionSize: 64 * units.MiB})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	acc := make(chan *Session, 1)
	go func() {
		s, err := ln.Accept(ctx)
		if err != nil {
			t.Error(err)
		}
		acc <- s
	}()
	snd, err := Dial(ctx, ln.Addr().String(), Config{Secret: secret, Paths: 1, Pool: 64 * units.MiB})
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	rcv := <-acc
	if rcv == nil {
		t.FailNow()
	}
	defer rcv.Close()
	tr := rcv.rcv.recv.(*tcpReceiver).Receiver
	buf, err := snd.Alloc(48 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	data := buf.Bytes()
	for i := range data {
		data[i] = byte(i * 13)
	}
	if err := tr.PausePath(0); err != nil {
		t.Fatal(err)
	}
	x, err := snd.SendAsync(ctx, "changed", data)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff // after the checksum, before the last chunk is sent
	if err := tr.ResumePath(0); err != nil {
		t.Fatal(err)
	}
	if err := x.Wait(ctx); err == nil || !strings.Contains(err.Error(), "CRC32C") {
		t.Fatalf("sender: a tensor changed after its checksum ended with %v; want the receiver's CRC32C error", err)
	}
	_, err = rcv.Recv(ctx)
	var te *TransferError
	if !errors.As(err, &te) || te.Name != "changed" || !strings.Contains(err.Error(), "CRC32C") {
		t.Fatalf("receiver: Recv = %v; want a TransferError for \"changed\" naming the CRC32C", err)
	}
	if err := snd.Send(ctx, "intact", data); err != nil {
		t.Fatal(err)
	}
	tn, err := rcv.Recv(ctx)
	if err != nil || tn.Name != "intact" || !bytes.Equal(tn.Data, data) {
		t.Fatalf("after the mismatch: %v, %v", tn, err)
	}
}
