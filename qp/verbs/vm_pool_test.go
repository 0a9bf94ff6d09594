//go:build linux && cgo

package verbs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mptx-dev/mptx/qp"
	"github.com/mptx-dev/mptx/units"
)

// medianOf runs f n times and returns the median duration.
func medianOf(n int, f func() time.Duration) time.Duration {
	ds := make([]time.Duration, n)
	for i := range ds {
		ds[i] = f()
	}
	slices.Sort(ds)
	return ds[n/2]
}

// mmapTouched maps size bytes (hugetlb pages if huge) and writes every
// page, as a tensor computed in place would have.
func mmapTouched(t testing.TB, size units.Bytes, huge bool) []byte {
	t.Helper()
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	if huge {
		flags |= unix.MAP_HUGETLB
	}
	mem, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		t.Fatalf("mmap %v (huge %v): %v", size, huge, err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	for i := 0; i < len(mem); i += 4096 {
		mem[i] = byte(i >> 12)
	}
	return mem
}

// vmReport writes a named result file into MPTX_RXE_OUT (the results the
// rxe job copies back) and logs it.
func vmReport(t testing.TB, name, text string) {
	t.Helper()
	t.Logf("%s:\n%s", name, text)
	if dir := os.Getenv("MPTX_RXE_OUT"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// TestVMRegistrationCost measures what a send of memory from outside the
// registered pool costs on top of the send itself: registering it with
// the NIC (ibv_reg_mr(3) through Host.Register, which pins the pages and
// builds the device's page table for them) and deregistering it after
// (ibv_dereg_mr), or copying it into registered memory (the session's
// staging); against the send of the same bytes from the registered pool.
// The table lands in $MPTX_RXE_OUT/registration.txt. Numbers are Soft-RoCE
// under TCG: the emulator's, not a NIC's; the ratios are the point.
func TestVMRegistrationCost(t *testing.T) {
	e := needVM(t)
	h, err := OpenHost(HostConfig{Devices: e.sender[:1], PoolSize: 4 * units.MiB, HugePages: HugeNever})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	reps := func(size units.Bytes) int {
		switch {
		case size <= units.MiB:
			return 21
		case size <= 16*units.MiB:
			return 7
		}
		return 3
	}
	type row struct {
		size              units.Bytes
		reg, dereg, copy_ time.Duration
		hugeReg           time.Duration // 0: not measured
		send              time.Duration // 0: not measured
	}
	var rows []row
	sizes := []units.Bytes{4 * units.KiB, 64 * units.KiB, units.MiB, 16 * units.MiB, 64 * units.MiB, 256 * units.MiB, units.GiB}
	if s := os.Getenv("MPTX_RXE_REG_MAX"); s != "" {
		max, err := units.ParseBytes(s)
		if err != nil {
			t.Fatal(err)
		}
		sizes = slices.DeleteFunc(sizes, func(b units.Bytes) bool { return b > max })
	}
	for _, size := range sizes {
		mem := mmapTouched(t, size, false)
		r := row{size: size}
		var dereg []time.Duration
		r.reg = medianOf(reps(size), func() time.Duration {
			t0 := time.Now()
			b, err := h.Register(mem)
			if err != nil {
				t.Fatalf("Register(%v): %v", size, err)
			}
			d := time.Since(t0)
			t1 := time.Now()
			if err := b.Free(); err != nil {
				t.Fatal(err)
			}
			dereg = append(dereg, time.Since(t1))
			return d
		})
		slices.Sort(dereg)
		r.dereg = dereg[len(dereg)/2]
		if size <= 256*units.MiB {
			dst := mmapTouched(t, size, false)
			r.copy_ = medianOf(reps(size), func() time.Duration {
				t0 := time.Now()
				copy(dst, mem)
				return time.Since(t0)
			})
			unix.Munmap(dst)
		}
		unix.Munmap(mem)
		if size <= 64*units.MiB {
			if hm, err := unix.Mmap(-1, 0, int(max(size, 2*units.MiB)), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_HUGETLB); err == nil {
				for i := 0; i < len(hm); i += 4096 {
					hm[i] = 1
				}
				r.hugeReg = medianOf(reps(size), func() time.Duration {
					t0 := time.Now()
					b, err := h.Register(hm[:size])
					if err != nil {
						t.Fatalf("Register(%v hugetlb): %v", size, err)
					}
					d := time.Since(t0)
					b.Free()
					return d
				})
				unix.Munmap(hm)
			} else {
				t.Logf("no hugetlb pages for %v: %v", size, err)
			}
		}
		rows = append(rows, r)
		t.Logf("%v: reg %v dereg %v copy %v huge reg %v", size, r.reg, r.dereg, r.copy_, r.hugeReg)
	}
	// Sends from the registered pool, 4 KiB to 64 MiB (rxe's largest
	// message is 8 MiB: 1 MiB writes, the last WRITE WITH IMM).
	p := newPair(t, e, pairOpts{nics: 1, qpsPerNIC: 1, size: 64 * units.MiB})
	wrs := make([]qp.SendWR, 0, 64)
	rbuf := make([]qp.Completion, 64)
	for i := range rows {
		size := rows[i].size
		if size > 64*units.MiB {
			continue
		}
		rows[i].send = medianOf(reps(size), func() time.Duration {
			wrs = wrs[:0]
			for off := units.Bytes(0); off < size; off += units.MiB {
				wrs = append(wrs, qp.SendWR{ID: uint64(len(wrs) + 1), Op: qp.OpWrite, Local: off, Remote: off, Len: min(units.MiB, size-off)})
			}
			wrs[len(wrs)-1].Op, wrs[len(wrs)-1].Imm = qp.OpWriteImm, 7
			t0 := time.Now()
			if n, err := p.conn.PostSend(0, wrs); n != len(wrs) || err != nil {
				t.Fatalf("PostSend of %d: %d, %v", len(wrs), n, err)
			}
			waitSend(t, p.conn, len(wrs))
			for got := 0; got < 1; {
				n, err := p.recv.Poll(rbuf)
				if err != nil {
					t.Fatal(err)
				}
				got += n
			}
			return time.Since(t0)
		})
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-8s %12s %12s %12s %12s %14s %16s %16s\n", "size", "ibv_reg_mr", "ibv_dereg_mr", "reg (huge)", "memcpy", "send from pool", "send after reg", "send after copy")
	ms := func(d time.Duration) string {
		if d == 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f ms", float64(d)/1e6)
	}
	for _, r := range rows {
		afterReg, afterCopy := time.Duration(0), time.Duration(0)
		if r.send > 0 {
			afterReg = r.reg + r.send + r.dereg
			if r.copy_ > 0 {
				afterCopy = r.copy_ + r.send
			}
		}
		fmt.Fprintf(&sb, "%-8v %12s %12s %12s %12s %14s %16s %16s\n", r.size, ms(r.reg), ms(r.dereg), ms(r.hugeReg), ms(r.copy_), ms(r.send), ms(afterReg), ms(afterCopy))
	}
	vmReport(t, "registration.txt", sb.String())
}
