# telemetry.mk — build the Jaeger binary that telemetry's end-to-end test
# (telemetry/jaeger_e2e_test.go) runs, before the tests. Include it from the
# Makefile and make the test target depend on it:
#
#   include telemetry.mk
#   test: deps jaeger
#
# scripts/jaeger.sh caches the binary in $(MPTX_CACHE) (default
# ~/.cache/mptx); a cold build takes about 5 minutes on 2 cores, later runs
# return at once. A plain `go test ./...` never builds it: the test finds
# the cached binary (scripts/jaeger.sh --cached) or MPTX_JAEGER, and skips
# with the reason when there is none. Under `make test` the binary is
# required (MPTX_JAEGER_REQUIRED=1): a missing one fails the test instead.

.PHONY: jaeger

jaeger:
	@bash scripts/jaeger.sh >/dev/null

test: export MPTX_JAEGER_REQUIRED := 1
