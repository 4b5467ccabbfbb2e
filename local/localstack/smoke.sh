#!/usr/bin/env bash
# local/localstack/smoke.sh: the produce/consume smoke test up.sh ends with, against any log
# node: creates a stream, produces records to it, consumes them back and compares.
#
#   LOAM_SERVER=http://127.0.0.1:8080 LOAM_API_KEY=... bash local/localstack/smoke.sh
#
# Uses `loam` from PATH, else `go run ./cmd/loam` from the repository. Exit status 0 when
# every record came back exactly once.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if command -v loam >/dev/null 2>&1; then
	loam=(loam)
else
	go build -o "${TMPDIR:-/tmp}/loam-smoke-cli" "$root/cmd/loam"
	loam=("${TMPDIR:-/tmp}/loam-smoke-cli")
fi
server=${LOAM_SERVER:-http://127.0.0.1:8080}
stream=${SMOKE_STREAM:-smoke-$(date +%s)-$$}
records=${SMOKE_RECORDS:-100}

for attempt in $(seq 1 60); do
	if curl -fsS "$server/healthz" >/dev/null 2>&1; then
		break
	fi
	if [ "$attempt" = 60 ]; then
		echo "smoke: $server/healthz does not answer" >&2
		exit 1
	fi
	sleep 1
done

"${loam[@]}" --server "$server" stream create "$stream" --partitions 3
want=$(mktemp)
got=$(mktemp)
trap 'rm -f "$want" "$got"' EXIT
for i in $(seq 1 "$records"); do
	printf '{"smoke":%d}\n' "$i"
done | tee "$want" | "${loam[@]}" --server "$server" produce "$stream" >/dev/null
"${loam[@]}" --server "$server" consume "$stream" >"$got"
sort -o "$want" "$want"
sort -o "$got" "$got"
if ! cmp -s "$want" "$got"; then
	echo "smoke: stream $stream: consumed records differ from produced ones:" >&2
	diff "$want" "$got" | head -20 >&2
	exit 1
fi
echo "smoke: stream $stream on $server: $records records produced and consumed back"
