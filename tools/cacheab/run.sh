#!/usr/bin/env bash
# Copyright The rdma_doctor Authors
# SPDX-License-Identifier: Apache-2.0
#
# What each cache a scrape keeps saves (make bench-caches; docs/caches.md).
# Each *.patch here turns one cache off; the script builds
# internal/dev/scrapebench's test binary once as the tree is and once per patch
# (each in a worktree of HEAD), then runs BenchmarkServeText/dgx-h100 (a
# default scrape short of HTTP) with GOMAXPROCS 1, as the server runs, in
# ROUNDS interleaved rounds: every binary once a round, so the machine's
# noise falls on all of them alike. It prints each variant's CPU per scrape
# (median and fastest round: load only ever adds) against the tree's.
# A cache whose patch does not cost a default scrape 5% is deleted
# (issue 30). Needs git and go; takes about ROUNDS x 15 s.
set -euo pipefail

rounds=${ROUNDS:-12}
root=$(git rev-parse --show-toplevel)
here=$root/tools/cacheab
work=$(mktemp -d)
cleanup() {
	for t in "$work"/*/; do
		[ -d "$t" ] && git -C "$root" worktree remove --force "$t" >/dev/null 2>&1 || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

build() { # name, tree
	(cd "$2" && go test -c -o "$work/$1.test" ./internal/dev/scrapebench/)
}

variants=(tree)
build tree "$root"
for p in "$here"/*.patch; do
	name=$(basename "$p" .patch)
	git -C "$root" worktree add --quiet --detach "$work/$name" HEAD
	if ! git -C "$work/$name" apply "$p"; then
		echo "cacheab: $name.patch no longer applies to HEAD: update it with the cache's code" >&2
		exit 1
	fi
	build "$name" "$work/$name"
	variants+=("$name")
done

out=$work/results.txt
for r in $(seq 1 "$rounds"); do
	for v in "${variants[@]}"; do
		(cd "$root/internal/dev/scrapebench" &&
			"$work/$v.test" -test.run '^$' -test.bench 'ServeText/dgx-h100$' -test.benchtime 1s -test.cpu 1) |
			awk -v v="$v" '/cpu-ns\/op/ { for (i = 1; i < NF; i++) if ($(i+1) == "cpu-ns/op") print v, $i }' >>"$out"
	done
	echo "cacheab: round $r of $rounds done" >&2
done

echo "variant (cache off)      rounds  median CPU/scrape   vs tree   fastest   vs tree"
sort -k1,1 -k2,2n "$out" | awk '
	{ v[$1, ++n[$1]] = $2; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
	function med(name,   c) { c = n[name]; return c % 2 ? v[name, (c + 1) / 2] : (v[name, c / 2] + v[name, c / 2 + 1]) / 2 }
	END {
		bm = med("tree"); bf = v["tree", 1]
		for (i = 1; i <= k; i++) {
			name = order[i]; m = med(name); f = v[name, 1]
			printf "%-24s %6d  %12.0f us  %+7.1f%%  %6.0f us  %+7.1f%%\n", name, n[name], m / 1000, 100 * (m - bm) / bm, f / 1000, 100 * (f - bf) / bf
		}
	}'
