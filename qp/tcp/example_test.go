package tcp_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/qp/tcp"
	"github.com/mptx-dev/mptx/units"
)

// Example connects a two-path sender to a receiver on loopback, writes
// 4 KiB with an immediate and waits for both sides' completions.
func Example() {
	secret := []byte("a shared secret of 32 bytes ....")
	ln, err := tcp.Listen("127.0.0.1:0", tcp.ListenConfig{Secret: secret})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	accepted := make(chan *tcp.Receiver)
	go func() {
		r, err := ln.Accept(ctx, make([]byte, units.MiB)) // the receive region
		if err != nil {
			log.Fatal(err)
		}
		accepted <- r
	}()
	send := []byte("hello, region")
	conn, err := tcp.Dial(ctx, ln.Addr().String(), tcp.DialConfig{
		Secret: secret, Paths: make([]tcp.PathConfig, 2), SendRegion: send,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	recv := <-accepted
	defer recv.Close()

	wr := []qp.SendWR{{ID: 7, Op: qp.OpWriteImm, Local: 0, Remote: 4096, Len: units.Bytes(len(send)), Imm: 42}}
	if _, err := conn.PostSend(1, wr); err != nil {
		log.Fatal(err)
	}
	cqe := make([]qp.Completion, 1)
	for n := 0; n == 0; n, _ = recv.Poll(cqe) {
		<-recv.Notify() // sleep until the receiver has completions
	}
	fmt.Printf("receiver: imm %d, %d bytes on path %d: %q\n", cqe[0].Imm, cqe[0].Bytes, cqe[0].Path, recv.Region()[4096:4096+len(send)])
	for n := 0; n == 0; n, _ = conn.Poll(cqe) {
		<-conn.Notify()
	}
	fmt.Printf("sender: WR %d %v\n", cqe[0].ID, cqe[0].Status)
	// Output:
	// receiver: imm 42, 13 bytes on path 1: "hello, region"
	// sender: WR 7 ok
}
