package interop

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mptx-dev/mptx/units"
)

// HtsimMatrix is an htsim connection matrix (csg-htsim
// sim/datacenter/connection_matrix.cpp, ConnectionMatrix::load):
//
//	Nodes N
//	Connections C
//	[Triggers T]
//	src->dst [id ID] [start T_ps] [size BYTES] [prio P]
//	         [trigger TID] [send_done_trigger TID] [recv_done_trigger TID]
//	trigger id TID oneshot|barrier [count K]
//
// Start times are picoseconds. A flow starts at its start time or when its
// trigger fires; a oneshot trigger fires on the first completion signalled to
// it, a barrier after count signals.
//
// Not supported (an error names the line): size 0 (htsim's "run forever"
// flows), multishot triggers, failure lines (use a failure workload) and
// the "addon" flag.
type HtsimMatrix struct {
	Nodes    int            `json:"nodes"`
	Conns    []HtsimConn    `json:"conns"`
	Triggers []HtsimTrigger `json:"triggers,omitempty"`
}

// HtsimConn is one connection line.
type HtsimConn struct {
	Src, Dst        int
	ID              int           // flow id; 0 if not given
	Start           time.Duration // rounded from picoseconds; meaningless when Trigger != 0
	Size            units.Bytes
	Prio            int
	Trigger         int // start when this trigger fires; 0 none
	SendDoneTrigger int // signal this trigger when the sender finishes; 0 none
	RecvDoneTrigger int // signal this trigger when the receiver has everything; 0 none
}

// HtsimTrigger is a trigger definition.
type HtsimTrigger struct {
	ID      int
	Barrier bool // false: oneshot
	Count   int  // signals a barrier waits for
}

// ParseHtsim reads a connection matrix; file names it in errors.
func ParseHtsim(r io.Reader, file string) (*HtsimMatrix, error) {
	l := newLineReader(r, file)
	m := &HtsimMatrix{Nodes: -1}
	declConns, declTrig := -1, 0
	trig := map[int]*HtsimTrigger{}
	ids := map[int]int{} // flow id → line
	for {
		f, err := l.next()
		if err != nil {
			return nil, err
		}
		if f == nil {
			break
		}
		switch {
		case f[0] == "Nodes" || f[0] == "Connections" || f[0] == "Triggers" || f[0] == "Failures":
			if len(f) != 2 {
				return nil, l.fail("want \"%s COUNT\"", f[0])
			}
			n, err := strconv.Atoi(f[1])
			if err != nil || n < 0 || n > maxFlows {
				return nil, l.fail("%s = %q: want a whole number in [0, %d]", f[0], f[1], maxFlows)
			}
			switch f[0] {
			case "Nodes":
				if n > MaxHosts {
					return nil, l.fail("Nodes = %d: at most %d hosts are supported (a k = 32 fat tree)", n, MaxHosts)
				}
				m.Nodes = n
			case "Connections":
				declConns = n
			case "Triggers":
				declTrig = n
			case "Failures":
				if n != 0 {
					return nil, l.fail("Failures: htsim failure lines are not supported; describe failures with a failure workload in the spec")
				}
			}
		case strings.Contains(f[0], "->"):
			if m.Nodes < 0 {
				return nil, l.fail("connection before the \"Nodes N\" line")
			}
			c, err := parseConn(l, f, m.Nodes)
			if err != nil {
				return nil, err
			}
			if c.ID != 0 {
				if prev, dup := ids[c.ID]; dup {
					return nil, l.fail("flow id %d already used at line %d", c.ID, prev)
				}
				ids[c.ID] = l.n
			}
			m.Conns = append(m.Conns, c)
		case f[0] == "trigger":
			t, err := parseTrigger(l, f)
			if err != nil {
				return nil, err
			}
			if _, dup := trig[t.ID]; dup {
				return nil, l.fail("trigger id %d defined twice", t.ID)
			}
			trig[t.ID] = &t
		case f[0] == "failure":
			return nil, l.fail("failure lines are not supported; describe failures with a failure workload in the spec")
		default:
			return nil, l.fail("unknown line %q: want Nodes, Connections, Triggers, src->dst ... or trigger ...", f[0])
		}
	}
	if m.Nodes < 0 {
		return nil, &ParseError{File: file, Msg: "no \"Nodes N\" line"}
	}
	if declConns >= 0 && declConns != len(m.Conns) {
		return nil, &ParseError{File: file, Msg: fmt.Sprintf("Connections says %d but the file has %d connection lines", declConns, len(m.Conns))}
	}
	if declTrig != len(trig) {
		return nil, &ParseError{File: file, Msg: fmt.Sprintf("Triggers says %d but the file defines %d", declTrig, len(trig))}
	}
	for _, c := range m.Conns {
		for _, id := range []int{c.Trigger, c.SendDoneTrigger, c.RecvDoneTrigger} {
			if id != 0 && trig[id] == nil {
				return nil, &ParseError{File: file, Msg: fmt.Sprintf("trigger %d is used by flow %d->%d but never defined", id, c.Src, c.Dst)}
			}
		}
	}
	for _, t := range trig {
		m.Triggers = append(m.Triggers, *t)
	}
	sort.Slice(m.Triggers, func(i, j int) bool { return m.Triggers[i].ID < m.Triggers[j].ID })
	return m, nil
}

func parseConn(l *lineReader, f []string, nodes int) (HtsimConn, error) {
	var c HtsimConn
	src, dst, _ := strings.Cut(f[0], "->")
	var err error
	if c.Src, err = nodeID(src, nodes); err != nil {
		return c, l.fail("src %v", err)
	}
	if c.Dst, err = nodeID(dst, nodes); err != nil {
		return c, l.fail("dst %v", err)
	}
	if c.Src == c.Dst {
		return c, l.fail("flow from node %d to itself", c.Src)
	}
	hasStart, hasSize := false, false
	for i := 1; i < len(f); i++ {
		key := f[i]
		if key == "addon" {
			return c, l.fail("the addon flag is not supported")
		}
		if i+1 >= len(f) {
			return c, l.fail("%s needs a value", key)
		}
		i++
		val := f[i]
		switch key {
		case "start":
			ps, err := strconv.ParseFloat(val, 64)
			if err != nil || !(ps >= 0 && ps < 1e21) {
				return c, l.fail("start = %q: want picoseconds >= 0", val)
			}
			c.Start = time.Duration(int64(ps+500) / 1000)
			hasStart = true
		case "size":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n < 0 {
				return c, l.fail("size = %q: want bytes > 0", val)
			}
			if n == 0 {
				return c, l.fail("size 0 (an endless flow) is not supported: give the flow a size")
			}
			c.Size = units.Bytes(n)
			hasSize = true
		case "id", "prio", "trigger", "send_done_trigger", "recv_done_trigger":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 || n > maxFlows*16 {
				return c, l.fail("%s = %q: want a whole number >= 0", key, val)
			}
			if n == 0 && key != "prio" {
				return c, l.fail("%s 0 is not allowed (htsim reserves 0 for none)", key)
			}
			switch key {
			case "id":
				c.ID = n
			case "prio":
				c.Prio = n
			case "trigger":
				c.Trigger = n
			case "send_done_trigger":
				c.SendDoneTrigger = n
			case "recv_done_trigger":
				c.RecvDoneTrigger = n
			}
		default:
			return c, l.fail("unknown token %q: want id, start, size, prio, trigger, send_done_trigger or recv_done_trigger", key)
		}
	}
	switch {
	case !hasSize:
		return c, l.fail("flow %d->%d has no size", c.Src, c.Dst)
	case hasStart && c.Trigger != 0:
		return c, l.fail("flow %d->%d has both a start time and a trigger", c.Src, c.Dst)
	case !hasStart && c.Trigger == 0:
		return c, l.fail("flow %d->%d has neither a start time nor a trigger", c.Src, c.Dst)
	}
	return c, nil
}

func parseTrigger(l *lineReader, f []string) (HtsimTrigger, error) {
	var t HtsimTrigger
	typed := false
	for i := 1; i < len(f); i++ {
		switch f[i] {
		case "id", "count":
			if i+1 >= len(f) {
				return t, l.fail("%s needs a value", f[i])
			}
			n, err := strconv.Atoi(f[i+1])
			if err != nil || n <= 0 || n > maxFlows {
				return t, l.fail("%s = %q: want a whole number > 0", f[i], f[i+1])
			}
			if f[i] == "id" {
				t.ID = n
			} else {
				t.Count = n
			}
			i++
		case "oneshot", "barrier":
			if typed {
				return t, l.fail("trigger has more than one type")
			}
			typed, t.Barrier = true, f[i] == "barrier"
		case "multishot":
			return t, l.fail("multishot triggers are not supported (use oneshot or barrier)")
		default:
			return t, l.fail("unknown trigger token %q: want id, count, oneshot or barrier", f[i])
		}
	}
	switch {
	case t.ID == 0:
		return t, l.fail("trigger has no id")
	case !typed:
		return t, l.fail("trigger %d has no type (oneshot or barrier)", t.ID)
	case t.Barrier && t.Count == 0:
		return t, l.fail("barrier trigger %d needs count K", t.ID)
	}
	if !t.Barrier {
		t.Count = 1
	}
	return t, nil
}

// WriteHtsim writes m in connection-matrix format (the inverse of
// ParseHtsim).
func WriteHtsim(w io.Writer, m *HtsimMatrix) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "Nodes %d\nConnections %d\n", m.Nodes, len(m.Conns))
	if len(m.Triggers) > 0 {
		fmt.Fprintf(bw, "Triggers %d\n", len(m.Triggers))
	}
	for _, c := range m.Conns {
		fmt.Fprintf(bw, "%d->%d", c.Src, c.Dst)
		if c.ID != 0 {
			fmt.Fprintf(bw, " id %d", c.ID)
		}
		if c.Trigger != 0 {
			fmt.Fprintf(bw, " trigger %d", c.Trigger)
		} else {
			fmt.Fprintf(bw, " start %d", int64(c.Start)*1000)
		}
		fmt.Fprintf(bw, " size %d", int64(c.Size))
		if c.Prio != 0 {
			fmt.Fprintf(bw, " prio %d", c.Prio)
		}
		if c.SendDoneTrigger != 0 {
			fmt.Fprintf(bw, " send_done_trigger %d", c.SendDoneTrigger)
		}
		if c.RecvDoneTrigger != 0 {
			fmt.Fprintf(bw, " recv_done_trigger %d", c.RecvDoneTrigger)
		}
		bw.WriteByte('\n')
	}
	for _, t := range m.Triggers {
		if t.Barrier {
			fmt.Fprintf(bw, "trigger id %d barrier count %d\n", t.ID, t.Count)
		} else {
			fmt.Fprintf(bw, "trigger id %d oneshot\n", t.ID)
		}
	}
	return bw.Flush()
}
