package experiments

import "github.com/mptx-dev/mptx/cc"

// PathSpec describes a path to the cc registry (line rate, base RTT, MTU,
// hops).
type PathSpec = cc.PathInfo

// CheckCCParams reports whether the cc registry accepts params for algo on
// a path like path; the error names the parameter, the value and its range.
func CheckCCParams(algo string, params map[string]string, path PathSpec) error {
	_, err := cc.New(algo, cc.Params(params), path)
	return err
}
