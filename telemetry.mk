# telemetry.mk — build the Jaeger binary that telemetry's end-to-end test
# (telemetry/jaeger_e2e_test.go) runs, before the tests. Include it from the
# Makefile and make the test target depend on it:
#
#   include telemetry.mk
#   test: deps jaeger
#
# scripts/jaeger.sh caches the binary in $(MPTX_CACHE) (default
# ~/.cache/mptx); a cold build takes about 5 minutes on 2 cores, later runs
# return at once. The test would build it itself if missing; doing it here
# keeps that time out of go test's timeout and shows it in the CI log.

.PHONY: jaeger

jaeger:
	@bash scripts/jaeger.sh >/dev/null
