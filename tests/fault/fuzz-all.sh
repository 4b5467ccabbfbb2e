#!/usr/bin/env bash
# Long fuzzing: every fuzz target of the module (each func Fuzz* in a _test.go file) runs
# for a set time, one after the other, and the inputs it found interesting during this run
# are copied from Go's fuzz cache into the package's testdata/fuzz/<Target>/, where `go
# test` replays them as seeds from then on (commit them). Inputs the cache held from
# earlier runs are left there. A crasher fails the run; Go writes it there itself.
#
#   tests/fault/fuzz-all.sh [-t 60s] [-p PATTERN]
#
#   -t  time per target (default 60s; 52 targets: about an hour; -t 20s: about 30 minutes)
#   -p  only targets whose package path or name matches this grep -E pattern
set -euo pipefail
per=60s
pattern=.
while getopts "t:p:" o; do
	case $o in
	t) per=$OPTARG ;;
	p) pattern=$OPTARG ;;
	*) echo "usage: $0 [-t 60s] [-p PATTERN]" >&2; exit 2 ;;
	esac
done
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
cache=$(go env GOCACHE)/fuzz
module=$(go list -m)
failed=0
stamp=$(mktemp)
trap 'rm -f "$stamp"' EXIT
while IFS=: read -r file name; do
	dir=$(dirname "$file")
	pkg=$module/${dir#./}
	if ! grep -Eq -- "$pattern" <<<"$pkg $name"; then
		continue
	fi
	echo "== $pkg $name ($per)"
	touch "$stamp"
	sleep 1 # whole-second file times: what the run writes is newer than the stamp
	if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$per" "./${dir#./}"; then
		echo "!! $pkg $name failed: the crasher is in $dir/testdata/fuzz/$name/" >&2
		failed=1
	fi
	src=$cache/$pkg/$name
	if [ -d "$src" ]; then
		mkdir -p "$dir/testdata/fuzz/$name"
		n=0
		for f in "$src"/*; do
			[ -f "$f" ] && [ "$f" -nt "$stamp" ] || continue
			dst=$dir/testdata/fuzz/$name/$(basename "$f")
			if [ ! -e "$dst" ]; then
				cp "$f" "$dst"
				n=$((n + 1))
			fi
		done
		echo "   kept $n new inputs in $dir/testdata/fuzz/$name/"
	fi
done < <(grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . | sed 's/:func /:/' | sort -u)
exit $failed
