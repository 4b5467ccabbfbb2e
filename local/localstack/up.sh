#!/usr/bin/env bash
# local/localstack/up.sh: Loam on LocalStack with Docker, from the repository root.
#
#   bash local/localstack/up.sh         # up: LocalStack, terraform apply, sequencer + log node, smoke test
#   bash local/localstack/up.sh down    # terraform destroy, then remove the containers and volumes
#
# Needs docker (with compose), terraform and go. LocalStack's free edition serves what TARGETS
# names: the bucket with its wal/ notification queue, the table, the KMS key, the four
# functions with the segmenter's queue mapping and the sweeps' schedules, the gateway
# endpoints. The sequencer and the log node run as compose containers (on AWS: EC2 voters and
# ECS tasks behind a load balancer, which need LocalStack Pro).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

# The module's resources LocalStack's free edition implements; terraform adds what they
# depend on (roles, policies, security groups, the sequencer's network interface).
TARGETS=(
	module.loam.aws_s3_bucket_notification.data
	module.loam.aws_s3_bucket_server_side_encryption_configuration.data
	module.loam.aws_s3_bucket_public_access_block.data
	module.loam.aws_s3_bucket_lifecycle_configuration.data
	module.loam.aws_s3_bucket_policy.data
	module.loam.aws_dynamodb_table.coord
	module.loam.aws_kms_alias.data
	module.loam.aws_lambda_event_source_mapping.segmenter
	module.loam.aws_scheduler_schedule.sweep
	module.loam.aws_vpc_endpoint.gateway
)

for tool in docker terraform go curl; do
	command -v "$tool" >/dev/null || { echo "up.sh: $tool is not on PATH" >&2; exit 1; }
done

case "$(uname -m)" in
aarch64 | arm64) arch=arm64 goarch=arm64 ;;
*) arch=x86_64 goarch=amd64 ;;
esac

# A fresh admin key, kept in .env (compose reads it; clients send it as LOAM_API_KEY).
if [ ! -f "$here/.env" ]; then
	secret=$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
	printf 'LOAM_ADMIN_KEY=loam_%s_%s\n' "$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')" "$secret" >"$here/.env"
fi
# shellcheck disable=SC1091
. "$here/.env"

compose() { docker compose -f "$here/compose.yaml" --env-file "$here/.env" "$@"; }
tf() {
	TF_IN_AUTOMATION=1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 \
		terraform -chdir="$here" "$@"
}
tfvars=(-var "functions_dir=$here/.work/functions" -var "architecture=$arch")

if [ "${1:-up}" = down ]; then
	tf destroy -auto-approve -input=false "${tfvars[@]}" || true
	compose down --volumes
	exit 0
fi

echo "== LocalStack"
compose up -d --wait localstack

echo "== functions ($goarch)"
bash "$root/functions/build.sh" -o "$here/.work/functions" -arch "$goarch"

echo "== terraform apply (LocalStack at http://localhost:4566, provider_override.tf)"
tf init -input=false
targets=()
for t in "${TARGETS[@]}"; do targets+=("-target=$t"); done
tf apply -auto-approve -input=false "${tfvars[@]}" "${targets[@]}"

echo "== sequencer and log node"
compose up -d --build --wait sequencer lognode

echo "== smoke test"
LOAM_SERVER=http://127.0.0.1:8080 LOAM_API_KEY=$LOAM_ADMIN_KEY bash "$here/smoke.sh"

cat <<DONE

Loam runs on LocalStack:
  HTTP http://127.0.0.1:8080   gRPC 127.0.0.1:9090   Kafka 127.0.0.1:9092   OTLP 4317/4318
  export LOAM_API_KEY=$LOAM_ADMIN_KEY
  loam stream list
Down again: bash local/localstack/up.sh down
DONE
