#!/usr/bin/env bash
# functions/build.sh: builds the four Lambda functions (segmenter, retention, compaction, gc)
# as deployment packages for the provided.al2023 runtime: DIR/<function>-<arch>.zip, each
# holding one static executable named bootstrap, built with the production flags
# (CGO_ENABLED=0, -tags lambda.norpc, -trimpath, -ldflags "-s -w").
#
#   functions/build.sh                 # both architectures into dist/functions
#   functions/build.sh -o DIR -arch arm64
#
# Terraform (terraform/modules/loam, variable functions_dir) and SAM read these zips.
set -euo pipefail
cd "$(dirname "$0")/.."
out=dist/functions
archs="arm64 amd64"
while [[ $# -gt 0 ]]; do
	case "$1" in
	-o) out="$2"; shift 2 ;;
	-arch) archs="$2"; shift 2 ;;
	*) echo "usage: functions/build.sh [-o DIR] [-arch arm64|amd64|\"arm64 amd64\"]" >&2; exit 2 ;;
	esac
done
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/lambdazip" ./functions/internal/lambdazip
for arch in $archs; do
	case "$arch" in arm64 | amd64) ;; *) echo "functions/build.sh: unknown arch $arch" >&2; exit 2 ;; esac
	for fn in segmenter retention compaction gc; do
		CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -tags lambda.norpc -trimpath -ldflags "-s -w" \
			-o "$work/$fn-$arch/bootstrap" "./functions/$fn"
		"$work/lambdazip" -o "$out/$fn-$arch.zip" "$work/$fn-$arch/bootstrap"
		echo "$out/$fn-$arch.zip"
	done
done
