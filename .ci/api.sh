#!/usr/bin/env bash
# The exported API of every package a user imports, recorded under api/ and
# checked with apidiff (golang.org/x/exp/cmd/apidiff, through the module
# proxy at the version pinned below). docs/versioning.md says how to use it.
#
#   bash .ci/api.sh [check]   fails on any change apidiff reports between a
#                             record and the package, compatible or not (an
#                             added name is API we then promise too)
#   bash .ci/api.sh update    rewrites the records of the packages whose API
#                             changed, for a deliberate change
#
# A record is the package's export data, as apidiff -w writes it (one file
# per package, 30-80 KB). It is written with -trimpath, so that it holds no
# path of the checkout or of GOROOT: the same source gives the same bytes in
# any directory. It also holds the declarations' line numbers, which move
# with unrelated edits, and the parts of the standard library's types the
# package refers to: update therefore rewrites a record only when apidiff
# finds a change, and a record stays byte for byte as it is otherwise.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)

apidiff_version=v0.0.0-20261113113407-e3970619a1a4
apidiff() { go run "golang.org/x/exp/cmd/apidiff@$apidiff_version" "$@"; }

core=github.com/seed2409de8f/retryhttp
# record, directory of the package's module (apidiff loads the package from
# there; otelretryhttp, a module of its own, is found through go.work, which
# also gives it the core from the working tree), import path.
packages=(
	"retryhttp        .              $core"
	"destinations     .              $core/destinations"
	"inbound          .              $core/inbound"
	"retryhttptest    .              $core/retryhttptest"
	"otelretryhttp    otelretryhttp  $core/otelretryhttp"
)

mode=${1:-check}
case "$mode" in
check | update) ;;
*)
	echo "usage: bash .ci/api.sh [check|update]" >&2
	exit 2
	;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p api

changed=()
for entry in "${packages[@]}"; do
	read -r name dir pkg <<<"$entry"
	record="$root/api/$name.export"
	if [[ ! -f "$record" ]]; then
		if [[ "$mode" == check ]]; then
			echo "$pkg: no record api/$name.export" >&2
			changed+=("$pkg")
			continue
		fi
		(cd "$dir" && GOFLAGS=-trimpath apidiff -w "$record" "$pkg")
		echo "$pkg: api/$name.export written"
		continue
	fi
	report=$(cd "$dir" && apidiff "$record" "$pkg")
	if [[ -z "$report" ]]; then
		echo "$pkg: unchanged"
		continue
	fi
	printf '%s: the API differs from api/%s.export:\n%s\n' "$pkg" "$name" "$report"
	if [[ "$mode" == update ]]; then
		(cd "$dir" && GOFLAGS=-trimpath apidiff -w "$tmp/$name.export" "$pkg")
		mv "$tmp/$name.export" "$record"
		echo "$pkg: api/$name.export rewritten"
	fi
	changed+=("$pkg")
done

if [[ "$mode" == check && ${#changed[@]} -gt 0 ]]; then
	cat >&2 <<EOF

The exported API changed (${changed[*]}).
If the change is deliberate, record it: bash .ci/api.sh update
and say so in CHANGELOG.md under [Unreleased] (Added, Changed or Removed).
EOF
	exit 1
fi
