package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The rules `mptx recv --out DIR` writes received tensors by. A tensor's
// name comes from the sender and is not trusted:
//
//  1. The file name is the tensor's name made safe (safeName): every '/',
//     '\', NUL, control character and invalid UTF-8 byte becomes '_'; a
//     leading '.' becomes '_' (so no ".", "..", hidden file or clash with
//     recv's own ".mptx-partial-*" files); an empty name becomes "tensor";
//     names are cut to 200 bytes. A name therefore never leaves DIR, and
//     on top of that every file operation goes through an os.Root opened
//     on DIR, which refuses any path that resolves outside it (symbolic
//     links included).
//  2. Nothing is overwritten: if NAME exists, the tensor becomes NAME.1,
//     NAME.2, ... (the first free one, up to NAME.9999). The final name is
//     claimed with link(2), which fails rather than replace an existing
//     file or follow a symbolic link planted there.
//  3. No partial files: the tensor is written to a hidden temporary file
//     in DIR and linked to its final name only when it is complete, so a
//     file under a tensor's name is always a whole, checked tensor
//     (written and closed, not fsynced). A failed write leaves nothing.
//  4. Files are created mode 0644 (less the umask); DIR is created (0755)
//     if it does not exist.

// maxNameBytes bounds a file name built from a tensor name: room for a
// ".9999" suffix under NAME_MAX (255) and some to spare.
const maxNameBytes = 200

// safeName maps a tensor name to a file name that stays in its directory;
// see the rules above.
func safeName(name string) string {
	var b strings.Builder
	for i, r := range strings.ToValidUTF8(name, "\uFFFD") {
		switch {
		case r == '/' || r == '\\' || r == 0 || r == utf8.RuneError || unicode.IsControl(r):
			r = '_'
		case i == 0 && r == '.':
			r = '_'
		}
		if b.Len()+utf8.RuneLen(r) > maxNameBytes {
			break
		}
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		return "tensor"
	}
	return b.String()
}

// outDir writes tensors into one directory; safe for concurrent use.
type outDir struct {
	root *os.Root
	path string
}

// openOutDir opens (creating it if needed) the directory dir.
func openOutDir(dir string) (*outDir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, badInput("--out %s: %v", dir, err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, badInput("--out %s: %v", dir, err)
	}
	return &outDir{root: r, path: dir}, nil
}

// Close closes the directory.
func (o *outDir) Close() error { return o.root.Close() }

// write stores data as the tensor name and returns the file's path (DIR
// joined with the name chosen).
func (o *outDir) write(name string, data []byte) (string, error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := ".mptx-partial-" + hex.EncodeToString(rnd[:])
	f, err := o.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", fmt.Errorf("--out %s: %w", o.path, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = o.root.Remove(tmp)
		return "", fmt.Errorf("writing %q to %s: %w", name, o.path, err)
	}
	defer func() { _ = o.root.Remove(tmp) }() // the final name keeps the data
	base := safeName(name)
	for i := 0; i < 10000; i++ {
		final := base
		if i > 0 {
			final = fmt.Sprintf("%s.%d", base, i)
		}
		err := o.root.Link(tmp, final)
		switch {
		case err == nil:
			return filepath.Join(o.path, final), nil
		case errors.Is(err, fs.ErrExist):
			continue
		}
		// No hard links here (some filesystems have none): claim the
		// name with an exclusive create, then move the data over it.
		p, cerr := o.root.OpenFile(final, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(cerr, fs.ErrExist) {
			continue
		}
		if cerr != nil {
			return "", fmt.Errorf("writing %q to %s: %w", name, o.path, cerr)
		}
		p.Close()
		if rerr := o.root.Rename(tmp, final); rerr != nil {
			_ = o.root.Remove(final)
			return "", fmt.Errorf("writing %q to %s: link: %v; rename: %w", name, o.path, err, rerr)
		}
		return filepath.Join(o.path, final), nil
	}
	return "", fmt.Errorf("writing %q to %s: %s and %s.1 to .9999 all exist", name, o.path, base, base)
}
