package cc

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
)

// Params are an algorithm's tunables by name, as they appear in experiment
// specs and on the command line: numbers ("0.0039"), durations ("50us"),
// rates ("40Mbps") and sizes ("4KiB"). Unknown names are an error.
//
// Parameters are literal: "0" means zero and is accepted only by tunables
// that zero turns off (documented per field); an absent name takes the
// field's default.
type Params map[string]string

// Factory builds an algorithm for one path.
type Factory func(p Params, path PathInfo) (Algorithm, error)

var (
	// registry maps names to factories. It is written only by Register
	// during package initialisation and read-only afterwards, so New and
	// Names may run concurrently.
	registry = map[string]Factory{}
	// sealed is set by the first New or Names; Register panics after it.
	sealed atomic.Bool
)

// Register makes an algorithm available to New under name. It must be
// called from an init function: it panics if name is empty or already
// registered, if f is nil, or once New or Names has been called (the
// registry is immutable after initialisation).
func Register(name string, f Factory) {
	_, dup := registry[name]
	switch {
	case name == "":
		panic("cc: BUG: Register with an empty name")
	case f == nil:
		panic(fmt.Sprintf("cc: BUG: Register(%q) with a nil factory", name))
	case dup:
		panic(fmt.Sprintf("cc: BUG: Register(%q) called twice", name))
	case sealed.Load():
		panic(fmt.Sprintf("cc: BUG: Register(%q) after init (the registry is read-only once New or Names has run)", name))
	}
	registry[name] = f
}

// New builds the algorithm registered as name for path, configured by p.
// An unknown name is an error listing the valid names; bad parameters are
// errors naming the algorithm, the parameter, the value and its valid
// range. It is safe for concurrent use.
func New(name string, p Params, path PathInfo) (Algorithm, error) {
	sealed.Store(true)
	f, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("cc: unknown algorithm %q (valid: %s)", name, strings.Join(Names(), ", "))
	}
	a, err := f(p, path)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Names returns the registered algorithm names, sorted. It is safe for
// concurrent use.
func Names() []string {
	sealed.Store(true)
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// registerConfig registers an algorithm whose tunables decode, by the
// specs of its config type C, into a C that build turns into the
// algorithm. Every algorithm in this package registers this way.
func registerConfig[C any, A Algorithm](name string, specs func(*C, PathInfo) []spec, build func(C, PathInfo) (A, error)) {
	Register(name, func(p Params, path PathInfo) (Algorithm, error) {
		var c C
		path, err := path.withDefaults()
		if err != nil {
			return nil, err
		}
		if err := decode(name, p, specs(&c, path)); err != nil {
			return nil, err
		}
		a, err := build(c, path)
		if err != nil {
			return nil, err
		}
		return a, nil
	})
}
