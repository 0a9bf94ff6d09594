// Command recv is the receiving half of mptx's two-process example: it
// accepts sessions and prints every tensor that arrives.
//
//	MPTX_SECRET=$(head -c 32 /dev/urandom | base64) go run ./examples/recv -listen 127.0.0.1:7000
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/mptx-dev/mptx"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:7000", "address to listen on")
	flag.Parse()
	ln, err := mptx.Listen(*addr, mptx.Config{Secret: []byte(os.Getenv("MPTX_SECRET"))})
	if err != nil {
		log.Fatal(err)
	}
	for {
		s, err := ln.Accept(context.Background())
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			defer s.Close()
			for {
				t, err := s.Recv(context.Background())
				if err != nil {
					log.Print(err) // a failed tensor, or the session's end
					if s.Err() != nil {
						return
					}
					continue
				}
				fmt.Printf("%s: %d bytes from %s over %s\n", t.Name, len(t.Data), s.RemoteAddr(), s.Transport())
				t.Release() // the range goes back to the session's region
			}
		}()
	}
}
