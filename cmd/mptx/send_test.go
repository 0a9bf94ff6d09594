package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mptx-dev/mptx/units"
)

func TestFillPatternDeterministic(t *testing.T) {
	a, b, c := make([]byte, 4099), make([]byte, 4099), make([]byte, 4099)
	fillPattern(a, 1)
	fillPattern(b, 1)
	fillPattern(c, 2)
	if !bytes.Equal(a, b) {
		t.Error("fillPattern(seed 1) differs between calls")
	}
	if bytes.Equal(a, c) {
		t.Error("fillPattern(seed 1) equals fillPattern(seed 2)")
	}
	zeros := 0
	for _, x := range a {
		if x == 0 {
			zeros++
		}
	}
	if zeros > len(a)/64 {
		t.Errorf("%d zero bytes in 4099: not a useful pattern", zeros)
	}
}

func TestSecretSources(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte("0123456789abcdef-secret\n"), 0o600)
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("tiny\n"), 0o600)
	f := xferFlags{secretFile: good}
	if s, err := f.secret(); err != nil || string(s) != "0123456789abcdef-secret" {
		t.Errorf("secret from file = %q, %v; want the file's first line without the newline", s, err)
	}
	f.secretFile = short
	if _, err := f.secret(); err == nil || !strings.Contains(err.Error(), "4 bytes; want at least 16") {
		t.Errorf("short secret: %v", err)
	}
	f.secretFile = ""
	t.Setenv("MPTX_SECRET", "")
	if _, err := f.secret(); err == nil || !strings.Contains(err.Error(), "MPTX_SECRET") {
		t.Errorf("no secret: %v", err)
	}
	t.Setenv("MPTX_SECRET", "from-the-environment-1234")
	if s, err := f.secret(); err != nil || string(s) != "from-the-environment-1234" {
		t.Errorf("secret from env = %q, %v", s, err)
	}
}

func TestPoolSize(t *testing.T) {
	f := verbsFlags{}
	if p, err := f.poolSize(64 * units.MiB); err != nil || p != 68*units.MiB {
		t.Errorf("default pool for 64 MiB = %v, %v; want 68MiB", p, err)
	}
	f.pool = "32MiB"
	if _, err := f.poolSize(64 * units.MiB); err == nil {
		t.Error("a pool smaller than the tensor was accepted")
	}
	f.pool = "1GiB"
	if p, err := f.poolSize(64 * units.MiB); err != nil || p != units.GiB {
		t.Errorf("--pool 1GiB = %v, %v", p, err)
	}
}

func TestSendNeedsAddress(t *testing.T) {
	t.Setenv("MPTX_SECRET", "0123456789abcdef-secret")
	rootCmd.SetArgs([]string{"send"})
	var out bytes.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetErr(&out)
	err := rootCmd.Execute()
	var u usageError
	if err == nil || !strings.Contains(err.Error(), "address is required") || !asUsage(err, &u) {
		t.Fatalf("mptx send without --to = %v; want a bad-input error asking for the address", err)
	}
}

func asUsage(err error, u *usageError) bool {
	x, ok := err.(usageError)
	if ok {
		*u = x
	}
	return ok
}
