#!/usr/bin/env bash
# Drives retryhttp and its peers through real reverse proxies (haproxy,
# nginx, caddy from Debian's packages) while backends are SIGKILLed and
# restarted and the proxy is reloaded, and counts failures and duplicate
# side effects per library. See bench/proxies/README.md.
#
#   bench/proxies/run.sh                 # one round per proxy, about a minute
#   bench/proxies/run.sh -rounds 3       # flags go to proxylab (-h lists them)
#   RETRYHTTP_DIR=/tmp/old bench/proxies/run.sh   # build against another checkout
#
# Installs the proxies with apt-get if they are missing (needs root). On a
# host with systemd, installing them may also start their system services;
# the harness never uses those: it runs its own processes on free loopback
# ports, as the current user, and kills every one of them when it ends.
# Not run by .ci/run. The table also goes to bench/proxies/results.txt
# (git-ignored; RESULTS=file to change).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
lib_dir=${RETRYHTTP_DIR:-$root}
results=${RESULTS:-$here/results.txt}

work=$(mktemp -d "${TMPDIR:-/tmp}/proxylab.XXXXXX")
lab_pid=
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	# proxylab kills what it started; if it could not (it was killed
	# itself), the process groups it listed are killed here.
	if [[ -n $lab_pid ]] && kill -0 "$lab_pid" 2>/dev/null; then
		kill -TERM "$lab_pid" 2>/dev/null || true
		wait "$lab_pid" 2>/dev/null || true
	fi
	if [[ -s $work/run/pgids ]]; then
		while read -r pgid; do
			kill -KILL -- "-$pgid" 2>/dev/null || true
		done <"$work/run/pgids"
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Install the proxies that are missing, skipping any that Debian does not
# have or that fails to install.
missing=()
for p in haproxy nginx caddy; do
	command -v "$p" >/dev/null || missing+=("$p")
done
if ((${#missing[@]} > 0)); then
	if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
		echo "run.sh: cannot install ${missing[*]} (needs root and apt-get): skipping them" >&2
	else
		echo "run.sh: installing ${missing[*]}" >&2
		apt-get update -qq
		for p in "${missing[@]}"; do
			candidate=$(apt-cache policy "$p" | awk '/Candidate:/ {print $2}')
			if [[ -z $candidate || $candidate == "(none)" ]]; then
				echo "run.sh: $p has no Debian package here: skipping it" >&2
				continue
			fi
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$p" >/dev/null ||
				echo "run.sh: apt-get install $p failed: skipping it" >&2
		done
	fi
fi

# Build proxylab in bench/storm, which go.work puts in one workspace with
# this checkout of retryhttp. RETRYHTTP_DIR builds it outside the workspace,
# with a copy of its go.mod whose replace points there.
storm=$root/bench/storm
if [[ -n ${RETRYHTTP_DIR:-} ]]; then
	cp "$storm/go.mod" "$work/lab.mod"
	cp "$storm/go.sum" "$work/lab.sum"
	go mod edit -replace="github.com/seed2409de8f/retryhttp=$(cd "$lib_dir" && pwd)" "$work/lab.mod"
	(cd "$storm" && GOWORK=off go build -mod=mod "-modfile=$work/lab.mod" -o "$work/proxylab" ./cmd/proxylab)
else
	(cd "$storm" && go build -o "$work/proxylab" ./cmd/proxylab)
fi

{
	echo "# command: ${RETRYHTTP_DIR:+RETRYHTTP_DIR=$RETRYHTTP_DIR }bench/proxies/run.sh $*"
	echo "# retryhttp: $(git -C "$lib_dir" log -1 --format='%h %s' 2>/dev/null || echo "$lib_dir")"
	echo "# date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "# machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(uname -sr), $(go version | cut -d' ' -f3-), load average $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$results"

mkdir -p "$work/run"
"$work/proxylab" -dir "$work/run" "$@" > >(tee -a "$results") &
lab_pid=$!
status=0
wait "$lab_pid" || status=$?
lab_pid=
echo "# written to $results" >&2
exit "$status"
