// Command send is the sending half of mptx's two-process example: it ships
// each file named on the command line as one tensor.
//
//	MPTX_SECRET=... go run ./examples/send -to 127.0.0.1:7000 weights.bin kv.bin
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
	to := flag.String("to", "127.0.0.1:7000", "receiver address")
	flag.Parse()
	ctx := context.Background()
	s, err := mptx.Dial(ctx, *to, mptx.Config{Secret: []byte(os.Getenv("MPTX_SECRET")), Paths: 4})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for _, name := range flag.Args() {
		data, err := os.ReadFile(name)
		if err != nil {
			log.Fatal(err)
		}
		if err := s.Send(ctx, name, data); err != nil { // returns once the receiver has it, checked
			log.Fatal(err)
		}
		fmt.Printf("sent %s (%d bytes)\n", name, len(data))
	}
}
