package cc

// Params are an algorithm's tunables by name, as they appear in experiment
// specs and on the command line: numbers ("0.0039"), durations ("50us"),
// rates ("40Mbps") and sizes ("4KiB"). Unknown names are an error.
type Params map[string]string

// Factory builds an algorithm for one path.
type Factory func(p Params, path PathInfo) (Algorithm, error)
