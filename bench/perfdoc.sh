#!/usr/bin/env bash
# Regenerates every figure of docs/performance.md, in place:
#
#   bench/perfdoc.sh                # counts (about a minute), then instructions (a few minutes)
#   COUNTS_ONLY=1 bench/perfdoc.sh  # the counts only
#
# 1. Allocations and bytes per request, live heap per host and storm
#    amplification, for retryhttp, the bare transport and the peers:
#    TestPerformanceDocCounts -update (bench/storm/figures_test.go) measures
#    them and writes the page's generated tables, machine line and marked
#    figures. Without -update, the same test checks them in .ci/run.
# 2. Instructions per request under callgrind: bench/cost/run.sh, whose
#    table (with its date and command) replaces the block gen:instructions.
#    CI cannot check these; valgrind is installed with apt-get if missing.
#
# Review the result with git diff docs/performance.md: the prose around the
# tables says what they show, and a change in a figure may change it.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
doc=docs/performance.md

echo "==> counts: cd bench/storm && go test -count=1 -run '^TestPerformanceDocCounts\$' -update ." >&2
(cd bench/storm && go test -count=1 -run '^TestPerformanceDocCounts$' -update .)

if [[ ${COUNTS_ONLY:-} == 1 ]]; then
	exit 0
fi

echo "==> instructions: bench/cost/run.sh" >&2
table=$(mktemp)
trap 'rm -f "$table" "$table.doc"' EXIT
bench/cost/run.sh >"$table"
awk -v table="$table" '
	/^<!-- gen:instructions -->$/ { print; while ((getline line < table) > 0) print line; skip = 1; next }
	/^<!-- \/gen:instructions -->$/ { skip = 0 }
	!skip
' "$doc" >"$table.doc"
grep -q '^<!-- /gen:instructions -->$' "$table.doc" || {
	echo "$doc has no block <!-- gen:instructions --> ... <!-- /gen:instructions -->" >&2
	exit 1
}
mv "$table.doc" "$doc"
echo "==> $doc written" >&2
