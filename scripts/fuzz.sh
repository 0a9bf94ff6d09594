#!/usr/bin/env bash
# Runs every Go fuzz target in the module (every func Fuzz* in a _test.go
# file) for a share of a total time budget, one target at a time (go test
# -fuzz takes one target per run). Each target's committed seed corpus is
# under its package's testdata/fuzz/<FuzzName>/ and always runs first; new
# crashers that a run finds are written there too, so they show up in
# `git status` and fail the run.
#
#   scripts/fuzz.sh                 # FUZZ_BUDGET (default 120s) split over all targets
#   FUZZ_BUDGET=600s scripts/fuzz.sh
#   FUZZ_TIME=30s scripts/fuzz.sh   # a fixed time per target instead
#   FUZZ_PKGS=./qp/... scripts/fuzz.sh
#
# A target gets at least 3 s (the fuzzer needs about a second to start and
# replays the corpus first).
set -euo pipefail
export PATH=/usr/local/go/bin:$PATH
cd "$(dirname "$0")/.."
pkgs=${FUZZ_PKGS:-./...}
budget=${FUZZ_BUDGET:-120s}

# package<TAB>target for every fuzz target.
mapfile -t targets < <(
  go list -f '{{.ImportPath}} {{.Dir}}' $pkgs | while read -r imp dir; do
    { grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null || true; } | sed 's/^func //' | sort -u |
      while read -r fn; do printf '%s\t%s\n' "$imp" "$fn"; done
  done
)
n=${#targets[@]}
if [ "$n" -eq 0 ]; then echo "fuzz: no targets in $pkgs"; exit 0; fi

if [ -n "${FUZZ_TIME:-}" ]; then
  per=$FUZZ_TIME
else
  secs=${budget%s}
  case $secs in *[!0-9]*) echo "fuzz: FUZZ_BUDGET=$budget: want whole seconds such as 120s" >&2; exit 2;; esac
  p=$((secs / n)); [ "$p" -lt 3 ] && p=3
  per=${p}s
fi
echo "fuzz: $n targets, $per each"
fail=0
for t in "${targets[@]}"; do
  imp=${t%%$'\t'*}; fn=${t##*$'\t'}
  printf 'fuzz: %-50s %s ... ' "$imp" "$fn"
  if out=$(go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$per" "$imp" 2>&1); then
    echo ok
  elif ! grep -q 'Failing input written to' <<<"$out" && grep -q '^    context deadline exceeded$' <<<"$out"; then
    # Go's fuzz coordinator can report its own -fuzztime deadline as a
    # failure when a worker is mid-call at the boundary (go.dev/issue/75804,
    # fixed in Go 1.27). No input failed: nothing was written.
    echo "ok (no failing input; go.dev/issue/75804 deadline race ignored)"
  else
    echo FAIL; echo "$out" | tail -30; fail=1
  fi
done
exit $fail
