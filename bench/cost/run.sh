#!/usr/bin/env bash
# Counts the instructions each row of issue 13's table costs, per request,
# under callgrind, for retryhttp, the bare transport and the peers
# (hashicorp/go-retryablehttp, failsafe-go failsafehttp), and prints them as
# a markdown table with each library's delta over bare.
#
#   bench/cost/run.sh             # every row, about 2 to 5 minutes
#   ROWS='GET|hedge' bench/cost/run.sh  # the rows whose label matches
#   JOBS=1 TIMEOUT=600 bench/cost/run.sh
#
# Each figure is (I(N2) - I(N1)) / (N2 - N1): I(N) the instructions that
# the whole benchmark binary executes when the row runs N times (callgrind's
# "Collected"), so that start-up, set-up and the benchmark's own first run
# cancel out. It runs with GOGC=off (no collection: the garbage collector's
# work would land on whichever request triggers it), GOMAXPROCS=1 and
# GODEBUG=asyncpreemptoff=1; cpu.rdtscp=off because valgrind 3.19 does not
# know the RDTSCP instruction that the Go runtime's cputicks uses. Counts
# repeat to about ±30 instructions per request from run to run on the rows
# run 20,000 times more, to a few hundred on the POST and new-host rows,
# run fewer times; timings, on a shared 2-CPU machine, do not repeat at all.
# A run that fails or takes longer than TIMEOUT prints so in its cell.
#
# Valgrind comes from Debian's packages; the script installs it with
# apt-get when it is missing. It is not run by CI. bench/perfdoc.sh runs it
# and puts its table in docs/performance.md.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../storm"
rows_re=${ROWS:-.}
jobs=${JOBS:-2}
limit=${TIMEOUT:-120} # seconds per valgrind run

if ! command -v valgrind >/dev/null; then
	echo "bench/cost/run.sh: installing valgrind (apt-get)" >&2
	sudo=""
	[[ $(id -u) == 0 ]] || sudo=sudo
	$sudo apt-get update -qq >&2
	$sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go test -c -o "$work/storm.test" .

# The rows: label | benchmark (one regexp per level, the lib level left
# out) | columns | N1 | N2. Rows whose cost is large run fewer times: what
# matters is that N2 - N1 requests dwarf the noise, a few hundred thousand
# instructions per run. The new-host rows must keep N2 + 1 below the host
# count (BenchmarkNewHost); the peers, which keep nothing per host, are not
# counted at 100,000 hosts (see the 1,000 row).
rows=(
	"happy GET (200 first time)|^BenchmarkHappyPath\$/^via=mem\$/^req=GET\$|bare retryhttp retryablehttp failsafehttp|2000|22000"
	"happy GET, circuit breaker|^BenchmarkHappyPathWith\$/^opt=breaker\$|bare retryhttp failsafehttp|2000|22000"
	"happy GET, OTel metrics|^BenchmarkHappyPathWith\$/^opt=metrics\$|bare retryhttp|1000|11000"
	"one 503 then 200|^BenchmarkRetry\$/^req=GET\$|bare retryhttp retryablehttp failsafehttp|1000|11000"
	"64 KiB POST, injected key|^BenchmarkHappyPath\$/^via=mem\$/^req=POST64KiB\$|bare retryhttp retryablehttp failsafehttp|500|5500"
	"64 KiB POST, caller's key|^BenchmarkHappyPath\$/^via=mem\$/^req=POST64KiBKeyed\$|bare retryhttp retryablehttp failsafehttp|500|5500"
	"hedged GET, hedge never fires|^BenchmarkHappyPathWith\$/^opt=hedge\$|bare retryhttp failsafehttp|1000|11000"
	"new host, after 1,000 hosts|^BenchmarkNewHost\$/^hosts=1000\$|bare retryhttp retryablehttp failsafehttp|100|900"
	"new host, after 100,000 hosts|^BenchmarkNewHost\$/^hosts=100000\$|bare retryhttp|1000|6000"
)
columns=(bare retryhttp retryablehttp failsafehttp)

# instructions N BENCH prints callgrind's count of a run of BENCH N times,
# or fails.
instructions() {
	local n=$1 bench=$2 log
	log=$(mktemp "$work/log.XXXXXX")
	# GOMEMLIMIT only guards the machine: a row that allocates gigabytes
	# (the new host at 100,000 before issue 13) is collected rather than
	# killed; no other row comes near it.
	if ! GOGC=off GOMEMLIMIT=2GiB GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off \
		timeout "$limit" valgrind --tool=callgrind --callgrind-out-file=/dev/null --log-file="$log" \
		"$work/storm.test" -test.run '^$' -test.bench "$bench" -test.benchtime "${n}x" >"$log.out" 2>&1; then
		return 1
	fi
	# A regexp that matches no benchmark passes too: check that it ran.
	grep -q '^PASS' "$log.out" && grep -Eq "^Benchmark[^[:space:]]*[[:space:]]+${n}[[:space:]]" "$log.out" || return 1
	sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' "$log"
}

# measure I LIB writes the instructions per request of row I, column LIB,
# to a file, or why there is none.
measure() {
	local i=$1 lib=$2 label bench libs n1 n2 a b
	IFS='|' read -r label bench libs n1 n2 <<<"${rows[$i]}"
	out="$work/result.$i.$lib"
	if ! a=$(instructions "$n1" "$bench/^lib=$lib\$") || [[ -z $a ]]; then
		echo "failed or over ${limit}s" >"$out"
		return
	fi
	if ! b=$(instructions "$n2" "$bench/^lib=$lib\$") || [[ -z $b ]]; then
		echo "failed or over ${limit}s" >"$out"
		return
	fi
	echo $(((b - a) / (n2 - n1))) >"$out"
}

running=0
for i in "${!rows[@]}"; do
	IFS='|' read -r label bench libs n1 n2 <<<"${rows[$i]}"
	[[ $label =~ $rows_re ]] || continue
	for lib in $libs; do
		measure "$i" "$lib" &
		if ((++running >= jobs)); then
			wait -n
			((running--))
		fi
	done
done
wait

commas() { sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$1"; }

echo "Instructions per request (callgrind), made by \`bench/cost/run.sh\` on $(date -u +%Y-%m-%d):"
echo "$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(go version | cut -d' ' -f3-),"
echo "$(valgrind --version). In brackets: the difference with the bare transport of the same row."
echo
echo "| row | bare | retryhttp | go-retryablehttp | failsafehttp |"
echo "|---|---:|---:|---:|---:|"
for i in "${!rows[@]}"; do
	IFS='|' read -r label bench libs n1 n2 <<<"${rows[$i]}"
	[[ $label =~ $rows_re ]] || continue
	line="| $label"
	bare=$(cat "$work/result.$i.bare" 2>/dev/null || true)
	for lib in "${columns[@]}"; do
		if [[ " $libs " != *" $lib "* ]]; then
			line+=" | —"
			continue
		fi
		v=$(cat "$work/result.$i.$lib")
		if ! [[ $v =~ ^-?[0-9]+$ ]]; then
			line+=" | $v"
		elif [[ $lib == bare || ! $bare =~ ^[0-9]+$ ]]; then
			line+=" | $(commas "$v")"
		else
			d=$((v - bare))
			sign=+
			((d < 0)) && sign=- && d=$((-d))
			line+=" | $(commas "$v") ($sign$(commas "$d"))"
		fi
	done
	echo "$line |"
done
