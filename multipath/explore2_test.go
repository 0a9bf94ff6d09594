package multipath_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mptx-dev/mptx/multipath"
	"github.com/mptx-dev/mptx/multipath/enginetest"
	"github.com/mptx-dev/mptx/units"
)

func TestExplorePrio2(t *testing.T) {
	var buf bytes.Buffer
	rates := []units.BitRate{100 * gbps, 100 * gbps, 100 * gbps, 100 * gbps}
	n := enginetest.New(t, multipath.Config{CC: "dcqcn", Recorder: traceRecorder{&buf}}, rates, 10*time.Microsecond)
	n.Submit(1, units.GiB, 0)
	n.RunUntil(at(3100 * time.Microsecond))
	buf.Reset()
	n.Trace = &buf
	n.SubmitSpec(multipath.TransferSpec{ID: 2, Size: 2 * units.MiB, Priority: 4})
	n.Run(2)
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, "preempt") || strings.Contains(l, "t2") || strings.Contains(l, "chunk-start") {
			fmt.Println(l)
		}
	}
}
