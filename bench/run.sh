#!/usr/bin/env bash
# Runs the peer benchmarks of bench/storm (retryhttp, a bare transport,
# hashicorp/go-retryablehttp, failsafe-go failsafehttp) and prints benchstat
# tables with the libraries side by side: time, bytes and allocations per
# request, for every row of docs/performance.md and the loopback rows.
# retryhttp is the first column: benchstat compares every other column with
# it (vs base). docs/performance.md is written by bench/perfdoc.sh, not by
# this script: its timings vary too much on a shared machine to publish.
#
# Each -count of BenchmarkNewHost first sends 100,000 GETs to as many hosts
# (about a second per library).
#
#   bench/run.sh            # COUNT=6 BENCHTIME=300ms by default
#   COUNT=10 bench/run.sh
#
# Raw results go to bench/peers.txt (git-ignored).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
bench=$(pwd)
count=${COUNT:-6}
benchtime=${BENCHTIME:-300ms}
benchstat=golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da

echo "# $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(go version)"
echo "# COUNT=$count BENCHTIME=$benchtime bench/run.sh"
(
	cd storm
	go test -run '^$' -bench 'HappyPath|Parallel|Retry|NewHost' -benchmem -count "$count" -benchtime "$benchtime" .
	# One iteration is a whole storm of 5,000 logical requests.
	go test -run '^$' -bench 'Storm' -count 3 -benchtime 1x .
) >"$bench/peers.txt"

go run "$benchstat" -col /lib "$bench/peers.txt"
