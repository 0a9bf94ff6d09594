package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mptx-dev/mptx/units"
)

func TestSafeName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"weights.bin", "weights.bin"},
		{"model-00001-of-00004.safetensors", "model-00001-of-00004.safetensors"},
		{"Gewichte_ü_漢字.pt", "Gewichte_ü_漢字.pt"},
		{"", "tensor"},
		{".", "_"},
		{"..", "_."},
		{"../../etc/passwd", "_._.._etc_passwd"},
		{"/etc/passwd", "_etc_passwd"},
		{`..\..\windows`, "_._.._windows"},
		{".bashrc", "_bashrc"},
		{".mptx-partial-0011223344556677", "_mptx-partial-0011223344556677"},
		{"a\x00b", "a_b"},
		{"line\nbreak\r\x1b[2J", "line_break__[2J"},
		{"bad\xffutf8", "bad_utf8"},
		{"a/b/c", "a_b_c"},
		{strings.Repeat("x", 300), strings.Repeat("x", maxNameBytes)},
		{strings.Repeat("é", 150), strings.Repeat("é", maxNameBytes/2)},
	} {
		if got := safeName(c.in); got != c.want {
			t.Errorf("safeName(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// checkSafe states what safeName guarantees.
func checkSafe(t *testing.T, in, got string) {
	t.Helper()
	if got == "" || len(got) > maxNameBytes || !utf8.ValidString(got) || strings.HasPrefix(got, ".") ||
		strings.ContainsAny(got, "/\\\x00") || filepath.Base(got) != got || !filepath.IsLocal(got) {
		t.Fatalf("safeName(%q) = %q: not a safe file name", in, got)
	}
	for _, r := range got {
		if r < 0x20 || r == 0x7f {
			t.Fatalf("safeName(%q) = %q: has control character %U", in, got, r)
		}
	}
}

func FuzzSafeName(f *testing.F) {
	for _, s := range []string{"weights.bin", "../../x", ".", "", "a\x00/b", "\xff\xfe", strings.Repeat("€", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		checkSafe(t, name, safeName(name))
	})
}

func TestOutDirWrite(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "in", "coming") // created by openOutDir
	o, err := openOutDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	// A symbolic link planted under a tensor's name must be neither
	// followed nor replaced.
	victim := filepath.Join(parent, "victim")
	os.WriteFile(victim, []byte("keep me"), 0o644)
	if err := os.Symlink(victim, filepath.Join(dir, "planted")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, data, want string
	}{
		{"a.bin", "first", "a.bin"},
		{"a.bin", "second", "a.bin.1"},
		{"a.bin", "third", "a.bin.2"},
		{"../../victim", "evil", "_._.._victim"},
		{"planted", "evil", "planted.1"},
		{"", "anonymous", "tensor"},
	} {
		got, err := o.write(c.name, []byte(c.data))
		if err != nil {
			t.Fatalf("write(%q): %v", c.name, err)
		}
		if want := filepath.Join(dir, c.want); got != want {
			t.Errorf("write(%q) = %s, want %s", c.name, got, want)
		}
		if b, err := os.ReadFile(got); err != nil || string(b) != c.data {
			t.Errorf("%s holds %q (%v), want %q", got, b, err, c.data)
		}
	}
	if b, _ := os.ReadFile(victim); !bytes.Equal(b, []byte("keep me")) {
		t.Errorf("the file behind the planted link was changed: %q", b)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".mptx-partial-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	if len(entries) != 7 { // 6 tensors and the planted link
		t.Errorf("%s holds %d entries, want 7", dir, len(entries))
	}
}

func TestParsePathSpec(t *testing.T) {
	p, err := parsePathSpec("local=10.0.1.1,remote=10.0.1.2,dev=eth1,rate=25Gbps,nic=1")
	if err != nil || p.Local != "10.0.1.1" || p.Remote != "10.0.1.2" || p.Interface != "eth1" || p.LineRate != 25e9 || p.NIC != 1 {
		t.Errorf("parsePathSpec(full) = %+v, %v", p, err)
	}
	if p, err := parsePathSpec("remote=fd00::2"); err != nil || p.Remote != "fd00::2" {
		t.Errorf("parsePathSpec(remote only) = %+v, %v", p, err)
	}
	for _, bad := range []string{"", "local", "local=", "local=host.example", "remote=1.2.3", "rate=fast", "rate=0", "nic=-1", "nic=64", "mtu=9000"} {
		if _, err := parsePathSpec(bad); err == nil {
			t.Errorf("parsePathSpec(%q) accepted", bad)
		}
	}
}

func TestSendBufferSize(t *testing.T) {
	const mib = 1 << 20
	ts := func(sizes ...int64) []tensorSource {
		var out []tensorSource
		for _, s := range sizes {
			out = append(out, tensorSource{size: units.Bytes(s)})
		}
		return out
	}
	for _, c := range []struct {
		flag  string
		sizes []int64
		want  int64
	}{
		{"", []int64{mib}, mib},
		{"", []int64{mib, 2 * mib}, 3 * mib},
		{"", []int64{200 * mib, 200 * mib}, 256 * mib},
		{"", []int64{1024 * mib, mib}, 1024 * mib},
		{"64MiB", []int64{mib}, 64 * mib},
	} {
		got, err := sendBufferSize(c.flag, ts(c.sizes...))
		if err != nil || int64(got) != c.want {
			t.Errorf("sendBufferSize(%q, %v) = %v, %v; want %d", c.flag, c.sizes, got, err, c.want)
		}
	}
	if _, err := sendBufferSize("1MiB", ts(2*mib)); err == nil {
		t.Error("a send buffer smaller than the largest tensor was accepted")
	}
}

func TestHumanBytes(t *testing.T) {
	for _, c := range []struct {
		in   int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.00 KiB"}, {67113864, "64.00 MiB"}, {1 << 30, "1.00 GiB"}, {5 << 40, "5.00 TiB"}, {5 << 50, "5120.00 TiB"}} {
		if got := humanBytes(units.Bytes(c.in)); got != c.want {
			t.Errorf("humanBytes(%d) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestDisplayName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"weights.bin", "weights.bin"},
		{"Gewichte ü 漢字", "Gewichte ü 漢字"},
		{"evil\x1b]0;pwned\x07", `"evil\x1b]0;pwned\a"`},
		{"a\nb", `"a\nb"`},
	} {
		if got := displayName(c.in); got != c.want {
			t.Errorf("displayName(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}
