package sendreg

import (
	"sync"
	"testing"
)

func TestAddLookupRemove(t *testing.T) {
	var tab Table
	a, b := []byte("aaaa"), []byte("bb")
	ida, err := tab.Add("t", a)
	if err != nil || ida == 0 {
		t.Fatalf("Add(a) = %#x, %v; want a nonzero id", ida, err)
	}
	idb, err := tab.Add("t", b)
	if err != nil || idb == 0 || idb == ida {
		t.Fatalf("Add(b) = %#x, %v; want a nonzero id other than %#x", idb, err, ida)
	}
	if got, ok := tab.Lookup(ida); !ok || &got[0] != &a[0] {
		t.Errorf("Lookup(%#x) = %q, %v; want a's buffer", ida, got, ok)
	}
	if err := tab.Remove("t", ida); err != nil {
		t.Fatal(err)
	}
	if _, ok := tab.Lookup(ida); ok {
		t.Errorf("Lookup of a removed id succeeded")
	}
	if err := tab.Remove("t", ida); err == nil {
		t.Errorf("second Remove(%#x) succeeded; want an error", ida)
	}
	// The slot is reused with a new generation: the stale id stays dead.
	idc, err := tab.Add("t", []byte("c"))
	if err != nil {
		t.Fatal(err)
	}
	if idc&0xffff != ida&0xffff || idc == ida {
		t.Errorf("Add after Remove = %#x; want slot %d reused under a new generation (old id %#x)", idc, ida&0xffff, ida)
	}
	if _, ok := tab.Lookup(ida); ok {
		t.Errorf("stale id %#x aliases the new region %#x", ida, idc)
	}
	for _, bad := range []uint32{0, 0xffff, 1 << 16} {
		if _, ok := tab.Lookup(bad); ok {
			t.Errorf("Lookup(%#x) succeeded", bad)
		}
	}
	if _, err := tab.Add("t", nil); err == nil {
		t.Error("Add(nil) succeeded; want an error")
	}
	if n := tab.Len(); n != 2 {
		t.Errorf("Len = %d, want 2", n)
	}
}

func TestLookupNoAllocs(t *testing.T) {
	var tab Table
	id, _ := tab.Add("t", make([]byte, 8))
	if a := testing.AllocsPerRun(100, func() { _, _ = tab.Lookup(id) }); a != 0 {
		t.Errorf("Lookup allocates %.1f times; want 0", a)
	}
}

// TestConcurrent registers and removes from several goroutines while
// others look up (run with -race).
func TestConcurrent(t *testing.T) {
	var tab Table
	keep, _ := tab.Add("t", []byte("keep"))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if b, ok := tab.Lookup(keep); !ok || string(b) != "keep" {
					t.Error("the kept region vanished")
					return
				}
			}
		}()
	}
	var adders sync.WaitGroup
	for g := range 4 {
		adders.Add(1)
		go func() {
			defer adders.Done()
			for i := range 500 {
				id, err := tab.Add("t", []byte{byte(g), byte(i)})
				if err != nil {
					t.Error(err)
					return
				}
				if b, ok := tab.Lookup(id); !ok || b[0] != byte(g) || b[1] != byte(i) {
					t.Errorf("Lookup(%#x) = %v, %v", id, b, ok)
				}
				if err := tab.Remove("t", id); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	adders.Wait()
	close(stop)
	wg.Wait()
	if n := tab.Len(); n != 1 {
		t.Errorf("Len = %d after the churn, want 1", n)
	}
}
