#!/usr/bin/env bash
# Installs the Debian packages mptx's build and tests need, if missing.
# (cgo headers for qp/verbs, iproute2 for the namespace tests of qp/tcp,
# chromium and a font for the browser tests of internal/browsertest and the
# experiment report; the Soft-RoCE VM installs its own in test/rxe/vm.sh).
# Idempotent; needs root (or sudo) only when something is missing.
set -euo pipefail
pkgs=(gcc libibverbs-dev rdma-core ibverbs-providers iproute2 chromium fonts-liberation)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "deps: installing ${missing[*]}"
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
