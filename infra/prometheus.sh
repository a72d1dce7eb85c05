#!/usr/bin/env bash
# Prometheus and promtool for the exporter tests: Debian's `prometheus` package (both binaries),
# installed only when missing. The tests start their own Prometheus servers on free ports, so
# the package's own service, if the machine starts it, does not get in the way.
set -euo pipefail

if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    echo "installing prometheus (Debian package: prometheus, promtool)..." >&2
    sudo_=""
    if [ "$(id -u)" != 0 ]; then sudo_="sudo"; fi
    $sudo_ apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
prometheus --version 2>&1 | head -1 >&2
