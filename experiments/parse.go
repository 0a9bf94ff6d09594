package experiments

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Limits on what a spec may hold, so that a hostile or broken file gets
// one error line within bounded time and memory (docs/experiments.md,
// "limits").
const (
	// MaxSpecBytes bounds a spec file.
	MaxSpecBytes = 1 << 20
	// MaxRefBytes bounds a file a spec refers to (an ns-3 topology or flow
	// file, an htsim matrix, a CDF).
	MaxRefBytes = 64 << 20
	// MaxDepth bounds the nesting of a spec's YAML: flow brackets, block
	// indicators on one line, and (as MaxDepth × 8) indentation columns.
	MaxDepth = 64
	// MaxRuns bounds the runs one spec may expand to.
	MaxRuns = 100000
)

// ParseFile reads, defaults and validates the spec at path. Errors are
// *SpecError values naming the file, line, field, bad value and what is
// allowed.
func ParseFile(path string) (*Spec, error) {
	data, err := readLimited(path, MaxSpecBytes)
	if err != nil {
		return nil, &SpecError{File: path, Msg: "cannot read spec: " + err.Error()}
	}
	return Parse(path, data, os.ReadFile)
}

// errTooLarge is readLimited's error for a file past its limit.
type errTooLarge struct{ limit int64 }

func (e errTooLarge) Error() string {
	return fmt.Sprintf("larger than %d bytes (the limit for this file)", e.limit)
}

// readLimited reads at most limit bytes of path; a longer file is an
// error (without reading the rest).
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errTooLarge{limit}
	}
	return data, nil
}

// Parse parses a spec held in data; file names it in errors and anchors
// relative file references (topology.file, workloads[].file, cdf paths),
// which are read with readFile. A spec with a sweep section parses into
// its first point, which holds the others (Spec.Points).
func Parse(file string, data []byte, readFile func(string) ([]byte, error)) (*Spec, error) {
	if len(data) > MaxSpecBytes {
		return nil, &SpecError{File: file, Msg: fmt.Sprintf("spec too large: %d bytes; at most %d", len(data), MaxSpecBytes)}
	}
	root, err := parseYAML(file, data)
	if err != nil {
		return nil, err
	}
	if root.kind != yMap {
		return nil, &SpecError{File: file, Line: root.pos.line, Col: root.pos.col, Msg: "a spec is a YAML mapping (name: …, topology: …, workloads: …), got " + root.kind.String()}
	}
	sweep, root, err := takeSweep(file, root)
	if err != nil {
		return nil, err
	}
	read := func(p string) ([]byte, error) {
		data, err := readFile(p)
		if err == nil && len(data) > MaxRefBytes {
			err = errTooLarge{MaxRefBytes}
		}
		return data, err
	}
	if len(sweep) == 0 {
		return parseOne(file, data, root, read, nil)
	}
	return parseSweep(file, data, root, read, sweep)
}

// parseOne decodes and validates one spec (one point of a sweep: params
// are its values).
func parseOne(file string, data []byte, root *ynode, read func(string) ([]byte, error), params []Param) (*Spec, error) {
	d := &decoder{file: file, seen: map[string]pos{}}
	s := &Spec{File: file, dir: filepath.Dir(file), src: data, Params: params}
	if err := d.decode(root, reflect.ValueOf(s).Elem(), ""); err != nil {
		return nil, err
	}
	v := &validator{d: d, s: s, read: read}
	for _, step := range specSteps {
		if err := step(v); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// specSteps validate a decoded spec in order; each may rely on the ones
// before it (workloads need the topology's graph, cc parameters its paths).
var specSteps = []func(*validator) error{
	(*validator).name,
	(*validator).topology,
	applyRules(switchRules),
	(*validator).switchChecks,
	applyRules(nicRules),
	(*validator).nicChecks,
	applyRules(stopRules),
	(*validator).sampleChecks,
	(*validator).workloads,
	(*validator).matrix,
	(*validator).seeds,
	(*validator).objective,
}

// validator fills in defaults and checks a decoded spec. Its methods return
// the first problem as a *SpecError.
type validator struct {
	d    *decoder
	s    *Spec
	read func(string) ([]byte, error)
	g    *Graph
}

// fail reports a problem at path, positioned at path or its nearest
// ancestor that appeared in the file.
func (v *validator) fail(path, value, msg string) error {
	e := &SpecError{File: v.d.file, Field: path, Value: value, Msg: msg}
	for p := path; ; {
		if at, ok := v.d.seen[p]; ok {
			e.Line, e.Col = at.line, at.col
			break
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return e
}

// set reports whether path was written in the file (as a non-null value).
func (v *validator) set(path string) bool { _, ok := v.d.seen[path]; return ok }

// readRef reads a file the spec refers to, relative to the spec.
func (v *validator) readRef(field, name string) ([]byte, error) {
	p := name
	if !filepath.IsAbs(p) {
		p = filepath.Join(v.s.dir, p)
	}
	data, err := v.read(p)
	if err != nil {
		return nil, v.fail(field, name, "cannot read: "+err.Error())
	}
	return data, nil
}

func oneOf(allowed []string) string { return "allowed: " + strings.Join(allowed, ", ") }

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// ValidName reports whether s is a valid scenario name (lower-case letters,
// digits, '-' and '_', at most 64, starting with a letter or digit): safe
// as a file name.
func ValidName(s string) bool { return nameRE.MatchString(s) }

func (v *validator) name() error {
	s := v.s
	if s.Name == "" {
		return v.fail("name", "", "required: the scenario's name (lower-case letters, digits, - and _)")
	}
	if !nameRE.MatchString(s.Name) {
		return v.fail("name", s.Name, "want lower-case letters, digits, - and _ (at most 64, starting with a letter or digit)")
	}
	return nil
}

func (v *validator) seeds() error {
	s := v.s
	if len(s.Seeds) == 0 {
		s.Seeds = []int64{1}
	}
	if len(s.Seeds) > 10000 {
		return v.fail("seeds", strconv.Itoa(len(s.Seeds)), "at most 10000 seeds")
	}
	for i, x := range s.Seeds {
		if slices.Index(s.Seeds, x) != i {
			return v.fail(fmt.Sprintf("seeds[%d]", i), strconv.FormatInt(x, 10), "duplicate seed")
		}
	}
	if n := s.Matrix.Size() * len(s.Seeds); n > MaxRuns {
		return v.fail("matrix", strconv.Itoa(n), fmt.Sprintf("matrix × seeds makes %d runs; at most %d", n, MaxRuns))
	}
	return nil
}

// onlyFields rejects a field of t that was written under prefix but is
// not in allowed (kind, name and class always are).
func (v *validator) onlyFields(prefix, kindDesc string, t reflect.Type, allowed []string) error {
	for _, f := range yamlFields(t) {
		if f == "kind" || f == "name" || f == "class" || f == "priority" || f == "connection" || slices.Contains(allowed, f) {
			continue
		}
		if v.set(join(prefix, f)) {
			return v.fail(join(prefix, f), "", fmt.Sprintf("does not apply to %s; it takes: %s", kindDesc, strings.Join(allowed, ", ")))
		}
	}
	return nil
}

// article prefixes a or an.
func article(w string) string {
	if strings.ContainsRune("aeiou", rune(w[0])) {
		return "an " + w
	}
	return "a " + w
}

func ptr[T any](x T) *T { return &x }

func fmtFloat(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return fmt.Sprint(f)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// asSpecError returns err as a *SpecError, wrapping a foreign error in one
// for file.
func asSpecError(file string, err error) *SpecError {
	var se *SpecError
	if errors.As(err, &se) {
		return se
	}
	return &SpecError{File: file, Msg: err.Error()}
}
