package cc

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mptx-dev/mptx/units"
)

// This file holds the tables that tie each config field to its registry
// parameter name, its type and its valid range. The same table validates a
// Config built in Go (errors name the field and the parameter) and decodes
// Params from the CLI or an experiment spec (errors name the parameter, the
// bad value and the valid range), so the two can never disagree.

// kind is a tunable's type, which decides how its parameter string parses.
type kind uint8

const (
	kNumber   kind = iota // float64: "0.0039", "1e-3"
	kInt                  // int: "5"
	kDuration             // time.Duration: "50us", "1.5ms"
	kRate                 // units.BitRate: "40Mbps", "25G", "unlimited"
	kSize                 // units.Bytes: "4KiB", "10MB", "300000", "unlimited"
	kEnum                 // a named variant: "periodic", "per_cnp"; stored as uint8 1..len(names)
)

func (k kind) noun() string {
	switch k {
	case kNumber:
		return "a number"
	case kInt:
		return "an integer"
	case kDuration:
		return "a duration such as 50us"
	case kRate:
		return "a rate such as 40Mbps"
	case kEnum:
		return "one of the names"
	}
	return "a size such as 4KiB"
}

// spec describes one tunable.
type spec struct {
	field string // Go field name in the Config, e.g. "G"
	param string // registry parameter name, e.g. "g"
	kind  kind
	ptr   any // *float64, *int, *time.Duration, *units.BitRate, *units.Bytes or *uint8 (kEnum)
	// names are a kEnum's values: the stored value i (1-based) is names[i-1];
	// 0 means "the default" and is never given as a parameter.
	names []string
	// off: a negative value in the Config means zero (the field's zero
	// value is taken by "use the default"); the parameter string "0" sets
	// it.
	off bool
	// lo, hi bound the effective value in base units (1, ns, bit/s, bytes);
	// ±Inf means unbounded. loOpen/hiOpen make the bound exclusive.
	lo, hi         float64
	loOpen, hiOpen bool
}

// value returns the field's effective value as a float (negative "off"
// values read as 0).
func (s spec) value() float64 {
	var v float64
	switch p := s.ptr.(type) {
	case *float64:
		v = *p
	case *int:
		v = float64(*p)
	case *time.Duration:
		v = float64(*p)
	case *units.BitRate:
		v = float64(*p)
	case *units.Bytes:
		v = float64(*p)
	case *uint8:
		v = float64(*p)
	default:
		panic(fmt.Sprintf("cc: BUG: spec %s has pointer type %T", s.field, s.ptr))
	}
	if s.off && v < 0 {
		return 0
	}
	return v
}

// raw formats the field's stored value exactly.
func (s spec) raw() string {
	switch p := s.ptr.(type) {
	case *float64:
		return strconv.FormatFloat(*p, 'g', -1, 64)
	case *int:
		return strconv.Itoa(*p)
	case *time.Duration:
		return p.String()
	case *units.BitRate:
		return p.String()
	case *units.Bytes:
		return fmt.Sprintf("%d bytes", int64(*p))
	case *uint8:
		return strconv.Itoa(int(*p))
	}
	return "?"
}

// format renders a bound in the tunable's unit.
func (s spec) format(v float64) string {
	switch s.kind {
	case kNumber:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case kInt:
		return strconv.FormatInt(int64(v), 10)
	case kDuration:
		return time.Duration(v).String()
	case kRate:
		return rateOf(v).String()
	}
	return fmt.Sprintf("%d bytes", int64(bytesOf(v)))
}

// want describes the valid range using name ("0 < G < 1", "F >= 1").
func (s spec) want(name string) string {
	if s.kind == kEnum {
		return name + " one of " + strings.Join(s.names, ", ")
	}
	lop, hop := "<=", "<="
	if s.loOpen {
		lop = "<"
	}
	if s.hiOpen {
		hop = "<"
	}
	var b strings.Builder
	switch {
	case math.IsInf(s.hi, 1):
		gop := ">="
		if s.loOpen {
			gop = ">"
		}
		fmt.Fprintf(&b, "%s %s %s", name, gop, s.format(s.lo))
	default:
		fmt.Fprintf(&b, "%s %s %s %s %s", s.format(s.lo), lop, name, hop, s.format(s.hi))
	}
	if s.off {
		b.WriteString(" (0 turns it off)")
	}
	return b.String()
}

// inRange reports whether v lies in the spec's range.
func (s spec) inRange(v float64) bool {
	if math.IsNaN(v) {
		return false
	}
	if v < s.lo || (s.loOpen && v == s.lo) {
		return false
	}
	if v > s.hi || (s.hiOpen && v == s.hi) {
		return false
	}
	return true
}

// check validates the field's effective value.
func (s spec) check(alg string) error {
	if s.kind == kEnum {
		if v := *s.ptr.(*uint8); v >= 1 && int(v) <= len(s.names) {
			return nil
		}
		return fmt.Errorf("cc: %s: %s = %s (parameter %s), want 0 (the default) or 1..%d (%s)", alg, s.field, s.raw(), s.param, len(s.names), strings.Join(s.names, ", "))
	}
	if s.inRange(s.value()) {
		return nil
	}
	return fmt.Errorf("cc: %s: %s = %s (parameter %s), want %s", alg, s.field, s.raw(), s.param, s.want(s.field))
}

// checkAll validates every field in order and returns the first error.
func checkAll(alg string, specs []spec) error {
	for _, s := range specs {
		if err := s.check(alg); err != nil {
			return err
		}
	}
	return nil
}

// set parses str into the field. Parameters are literal: "0" means zero,
// which is only accepted for fields that can be turned off.
func (s spec) set(alg, str string) error {
	bad := func() error {
		return fmt.Errorf("cc: %s: parameter %s = %q: want %s, %s", alg, s.param, str, s.kind.noun(), s.want(s.param))
	}
	t := strings.TrimSpace(str)
	if s.kind == kEnum {
		i := slices.Index(s.names, t)
		if i < 0 {
			return fmt.Errorf("cc: %s: parameter %s = %q: want one of %s", alg, s.param, str, strings.Join(s.names, ", "))
		}
		*s.ptr.(*uint8) = uint8(i + 1)
		return nil
	}
	var f float64 // the value, for the sign and range checks
	var i int64   // the exact value for integer-backed kinds
	switch s.kind {
	case kNumber:
		v, err := strconv.ParseFloat(t, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return bad()
		}
		f = v
	case kInt:
		v, err := strconv.ParseInt(t, 10, 32)
		if err != nil {
			return bad()
		}
		f, i = float64(v), v
	case kDuration:
		v, err := time.ParseDuration(t)
		if err != nil {
			return bad()
		}
		f, i = float64(v), int64(v)
	case kRate:
		v, err := units.ParseBitRate(t)
		if err != nil {
			return bad()
		}
		f, i = float64(v), int64(v)
	case kSize:
		v, err := units.ParseBytes(t)
		if strings.EqualFold(t, "unlimited") {
			v, err = units.MaxBytes, nil
		}
		if err != nil {
			return bad()
		}
		f, i = float64(v), int64(v)
	}
	switch {
	case f < 0:
		return bad()
	case f == 0 && !s.off:
		return bad()
	case f == 0:
		i, f = -1, -1 // "off": the Config's zero means "default"
	case !s.inRange(f):
		return bad()
	}
	switch p := s.ptr.(type) {
	case *float64:
		*p = f
	case *int:
		*p = int(i)
	case *time.Duration:
		*p = time.Duration(i)
	case *units.BitRate:
		*p = units.BitRate(i)
	case *units.Bytes:
		*p = units.Bytes(i)
	}
	return nil
}

// decode applies params to the fields described by specs. Unknown names
// and bad values are errors naming the algorithm, the parameter, the value
// and the valid range. Keys are visited in sorted order so the error is
// deterministic.
func decode(alg string, p Params, specs []spec) error {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		i := slices.IndexFunc(specs, func(s spec) bool { return s.param == k })
		if i < 0 {
			return fmt.Errorf("cc: %s: unknown parameter %q (valid: %s)", alg, k, strings.Join(paramNames(specs), ", "))
		}
		if err := specs[i].set(alg, p[k]); err != nil {
			return err
		}
	}
	return nil
}

// paramNames lists the specs' parameter names, sorted.
func paramNames(specs []spec) []string {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.param
	}
	slices.Sort(names)
	return names
}

// inf is +Inf, for unbounded ranges.
var inf = math.Inf(1)

// offOr returns v, or 0 when v is negative ("off").
func offOr[T ~int64 | ~int](v T) T { return max(v, 0) }
