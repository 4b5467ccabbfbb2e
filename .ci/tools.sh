#!/usr/bin/env bash
# .ci/tools.sh installs the binaries the tests need into <repo>/.tools/bin.
# Idempotent: each tool is installed only when missing. Run from anywhere.
# tests/testserver finds binaries on PATH first, then in <repo>/.tools/bin.
# With arguments (tool names, e.g. `tools.sh nats-server`) only those are installed.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$repo/.tools/bin"
mkdir -p "$bin"
export GOBIN="$bin"
export PATH="$bin:$PATH"

log() { printf 'tools.sh: %s\n' "$*" >&2; }

only=("$@")
want_one() { local t; for t in "${only[@]}"; do [[ "$t" == "$1" ]] && return 0; done; return 1; }

# go_tool NAME PACKAGE@VERSION installs a Go binary into .tools/bin unless that exact
# PACKAGE@VERSION is already there (a stamp file records what was installed).
go_tool() {
	local name="$1" pkg="$2" stamp="$bin/.$1.installed"
	if [[ ${#only[@]} -gt 0 ]] && ! want_one "$name"; then
		return
	fi
	if [[ -x "$bin/$name" && "$(cat "$stamp" 2>/dev/null)" == "$pkg" ]]; then
		log "$name: present ($bin/$name, $pkg)"
		return
	fi
	log "$name: go install $pkg"
	go install "$pkg"
	printf '%s\n' "$pkg" >"$stamp"
}

# S3 server for the objstore conformance suite (tests/testserver.StartVersityGW).
go_tool versitygw github.com/versity/versitygw/cmd/versitygw@v1.8.0

# Terraform linter with its bundled ruleset (tests/deploy TestTFLint; no plugin download).
go_tool tflint github.com/terraform-linters/tflint@v0.64.0

# Benchmark peer of tests/bench/suite.sh (NATS JetStream; the suite drives it with nats.go).
go_tool nats-server github.com/nats-io/nats-server/v2@v2.15.2

# gRPC CLI for the native gRPC API's reflection test (lognode-svc/grpcapi TestGrpcurl).
go_tool grpcurl github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4

# OpenTelemetry's load generator for the OTLP logs ingest test (lognode-svc/otlp TestTelemetrygen).
go_tool telemetrygen github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen@v0.161.0

# S3+SQS+DynamoDB+KMS in one endpoint (tests/testserver.StartMoto); preinstalled on our machines.
if [[ ${#only[@]} -gt 0 ]] && ! want_one moto_server; then
	:
elif command -v moto_server >/dev/null 2>&1; then
	log "moto_server: present ($(command -v moto_server))"
else
	log "moto_server: MISSING from PATH; trying pip install 'moto[server]==5.2.1'"
	if python3 -m pip install --quiet 'moto[server]==5.2.1' && command -v moto_server >/dev/null 2>&1; then
		log "moto_server: installed ($(command -v moto_server))"
	else
		log "ERROR: moto_server is not installed and pip could not install moto[server]==5.2.1"
		exit 1
	fi
fi

# Kafka clients of the gateway's compatibility tests (lognode-svc/kafka TestKcat,
# TestConfluentKafkaPython, TestKafkaJSIdempotent): Debian's kcat and
# python3-confluent-kafka, npm's kafkajs under .tools/node.
if [[ ${#only[@]} -eq 0 ]] || want_one kcat || want_one python3-confluent-kafka; then
	if command -v kcat >/dev/null 2>&1 && /usr/bin/python3 -c 'import confluent_kafka' 2>/dev/null; then
		log "kcat, python3-confluent-kafka: present"
	elif command -v apt-get >/dev/null 2>&1; then
		log "kcat, python3-confluent-kafka: apt-get install"
		apt-get install -y kcat python3-confluent-kafka >/dev/null
	else
		log "kcat, python3-confluent-kafka: no apt-get; their tests skip"
	fi
fi
# npm's kafkajs (the Kafka tests above) and apache-arrow (a second Arrow implementation that
# decodes the Arrow IPC a fetch of an arrow stream answers: lognode-svc/httpapi
# TestArrowIPCReadByArrowJS) under .tools/node, installed by one npm command (a second one
# would prune the first's packages).
npm_version() { sed -n 's/^ *"version": "\([^"]*\)".*/\1/p' "$repo/.tools/node/node_modules/$1/package.json" 2>/dev/null | head -n 1; }
if [[ ${#only[@]} -eq 0 ]] || want_one kafkajs || want_one apache-arrow; then
	if [[ "$(npm_version kafkajs)" == 2.2.4 && "$(npm_version apache-arrow)" == 21.2.0 ]]; then
		log "kafkajs, apache-arrow: present"
	elif command -v npm >/dev/null 2>&1; then
		log "kafkajs, apache-arrow: npm install kafkajs@2.2.4 apache-arrow@21.2.0"
		mkdir -p "$repo/.tools/node"
		(cd "$repo/.tools/node" && npm install --no-audit --no-fund --silent kafkajs@2.2.4 apache-arrow@21.2.0)
	else
		log "kafkajs, apache-arrow: no npm; their tests skip"
	fi
fi

# The hashicorp/aws Terraform provider for tests/deploy's emulator apply test: a Go module the
# proxy serves, cached outside the clone (a fresh clone reuses it). Building it takes about
# 44 minutes on 2 cores, so it is built only when asked (LOAM_BUILD_TF_PROVIDER=1); without
# it the test skips, naming this.
tf_provider_version=v1.60.1-0.20260602190131-5f2286d6d836
tf_provider="$HOME/.cache/loam/terraform-provider-aws/$tf_provider_version/terraform-provider-aws"
if [[ -x "$tf_provider" ]]; then
	log "terraform-provider-aws: present ($tf_provider)"
elif [[ "${LOAM_BUILD_TF_PROVIDER:-}" == 1 ]]; then
	log "terraform-provider-aws: go install (about 44 minutes)"
	GOBIN="$(dirname "$tf_provider")" go install -ldflags="-s -w" "github.com/hashicorp/terraform-provider-aws@$tf_provider_version"
else
	log "terraform-provider-aws: not built; TestEmulatorApply skips (LOAM_BUILD_TF_PROVIDER=1 builds it)"
fi
