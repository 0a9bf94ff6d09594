package mptx_test

import (
	"context"
	"fmt"

	"github.com/mptx-dev/mptx"
)

// Example ships one tensor between the two ends of a session, in one
// process for the example's sake: the receiver listens and accepts, the
// sender dials and sends. Over TCP here; over verbs where both hosts have
// RDMA devices (Transport auto).
func Example() {
	secret := []byte("example secret, 32 random bytes!") // use real randomness
	ln, err := mptx.Listen("127.0.0.1:0", mptx.Config{Secret: secret, RegionSize: 64 << 20})
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	ctx := context.Background()
	go func() {
		s, err := mptx.Dial(ctx, ln.Addr().String(), mptx.Config{Secret: secret, SendBuffer: 64 << 20})
		if err != nil {
			panic(err)
		}
		defer s.Close()
		kv := make([]byte, 16<<20) // a 16 MiB KV-cache block
		for i := range kv {
			kv[i] = byte(i)
		}
		if err := s.Send(ctx, "layer0/kv", kv); err != nil {
			panic(err)
		}
	}()
	s, err := ln.Accept(ctx)
	if err != nil {
		panic(err)
	}
	defer s.Close()
	t, err := s.Recv(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(t.Name, len(t.Data), t.Data[1000], s.Transport())
	t.Release()
	// Output: layer0/kv 16777216 232 tcp
}

// ExampleSession_SendAsync keeps several tensors in flight on one session
// and waits for each.
func ExampleSession_SendAsync() {
	secret := []byte("example secret, 32 random bytes!")
	ln, err := mptx.Listen("127.0.0.1:0", mptx.Config{Secret: secret, RegionSize: 64 << 20})
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	ctx := context.Background()
	done := make(chan struct{})
	go func() { // the receiving end: count and release
		defer close(done)
		s, _ := ln.Accept(ctx)
		defer s.Close()
		for range 4 {
			t, err := s.Recv(ctx)
			if err != nil {
				panic(err)
			}
			t.Release()
		}
	}()
	s, err := mptx.Dial(ctx, ln.Addr().String(), mptx.Config{Secret: secret, SendBuffer: 64 << 20})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	var ts []*mptx.Transfer
	for i := range 4 {
		t, err := s.SendAsync(ctx, fmt.Sprintf("shard%d", i), make([]byte, 4<<20))
		if err != nil {
			panic(err)
		}
		ts = append(ts, t)
	}
	for _, t := range ts {
		if err := t.Wait(ctx); err != nil {
			panic(err)
		}
		acked, total := t.Progress()
		fmt.Println(t.Name, acked == total)
	}
	<-done
	// Output:
	// shard0 true
	// shard1 true
	// shard2 true
	// shard3 true
}
