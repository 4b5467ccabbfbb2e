#!/usr/bin/env bash
# tests/bench/suite.sh -o DIR [-short] [-reps N] [-cpuprofile] [-memprofile]
#
# One command: Loam beside its peers (NATS JetStream, franz-go kfake) and this machine's
# limits, interleaved, as ratios. Writes DIR/results.json and DIR/results.md and prints the
# table; tests/bench/README.md says how to read it. It installs nats-server into
# .tools/bin when missing (.ci/tools.sh nats-server), builds the suite (its own Go module,
# tests/bench/suite, so the peers' dependencies stay out of the engine's go.mod), and runs
# it; the suite starts and stops every server itself and pins servers and load generator
# to separate CPUs with taskset when it is installed.
#
# -short (CI): every row once on tiny sizes, in well under 3 minutes; it asserts only that
# each row produced a positive finite number or names the surface that does not exist yet.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"

bash .ci/tools.sh nats-server
export PATH="$repo/.tools/bin:$PATH"

bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
(cd tests/bench/suite && go build -o "$bin/suite" .)
exec "$bin/suite" "$@"
