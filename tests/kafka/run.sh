#!/usr/bin/env bash
# tests/kafka/run.sh runs franz-go's own pkg/kgo integration tests (franz-go v1.22.3)
# against a `loam dev` cluster started here on free ports, and stops it after.
#
#   tests/kafka/run.sh                     # 1 voter, 1 log node
#   LOAM_DEV_ARGS="--sequencers 3 --nodes 2" tests/kafka/run.sh
#   tests/kafka/run.sh -run 'TestProduceConsume'   # extra go test arguments
#
# The transactional tests are skipped (transactions are not served); see README.md for the
# tests that fail and why.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="$(mktemp -d)"
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$work"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
kport=$(port)
(cd "$repo" && go build -o "$work/loam" ./cmd/loam && go build -o "$work/lognode-svc" ./lognode-svc && go build -o "$work/sequencer-svc" ./sequencer-svc)
# shellcheck disable=SC2086
"$work/loam" dev --data-dir "$work/data" --host 127.0.0.1 --http-port "$(port)" --grpc-port 0 --kafka-port "$kport" \
	--sequencer-port "$(port)" --raft-port "$(port)" --flush-interval 20ms --log-level warn \
	--sequencer-bin "$work/sequencer-svc" --lognode-bin "$work/lognode-svc" ${LOAM_DEV_ARGS:-} >"$work/dev.log" 2>&1 &
pid=$!
# A second, single-node cluster that checks API keys serves the SASL/SCRAM tests
# (TestSCRAMAuth, TestSCRAMAuthBadCredentials): the user name is the key's id, the password
# the whole key (docs/kafka.md).
skport=$(port)
scram_id=$(python3 -c 'import secrets; print(secrets.token_hex(12))')
scram_key="loam_${scram_id}_$(python3 -c 'import secrets; print(secrets.token_urlsafe(24).replace("_", "x"))')"
LOAM_ADMIN_KEY="$scram_key" "$work/loam" dev --auth --data-dir "$work/scram" --host 127.0.0.1 --http-port "$(port)" --grpc-port 0 \
	--kafka-port "$skport" --sequencer-port "$(port)" --raft-port "$(port)" --otlp-http-port 0 --otlp-grpc-port 0 --log-level warn >"$work/scram.log" 2>&1 &
spid=$!
trap 'kill "$pid" "$spid" 2>/dev/null; wait "$pid" "$spid" 2>/dev/null; rm -rf "$work"' EXIT
for p in "$kport" "$skport"; do
	for _ in $(seq 1 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then break; fi
		sleep 0.2
	done
done
cd "$here"
KGO_TEST_SCRAM_SEEDS="127.0.0.1:$skport" KGO_TEST_SCRAM="$scram_id:$scram_key:512" \
KGO_SEEDS="127.0.0.1:$kport" KGO_TEST_RF=1 KGO_TEST_RECORDS="${KGO_TEST_RECORDS:-20000}" KGO_LOG_LEVEL=none \
	go test -count=1 -timeout 20m -skip 'TestTxn' "$@" github.com/twmb/franz-go/pkg/kgo
