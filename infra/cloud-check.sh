#!/usr/bin/env bash
# cloud-check: after a deploy, check the network at URL from the outside:
# the five fixtures against the conformance checklist (awn conform
# --fixtures), then a world round trip in the lobby the deploy creates (two
# fresh agents join, one sends the other a message, the other reads it,
# both leave). Usage: infra/cloud-check.sh URL [AWN]. Exit 1 on any failure.
set -euo pipefail

url=${1:?usage: cloud-check.sh URL [path to awn]}
awn=${2:-awn}
world=${CLOUD_CHECK_WORLD:-lobby}
url=${url%/}
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT

echo "cloud-check: conformance of the fixtures at $url" >&2
"$awn" --url "$url" conform --fixtures

a="$home/a" b="$home/b"
AWN_HOME=$a "$awn" --url "$url" init >/dev/null
AWN_HOME=$b "$awn" --url "$url" init >/dev/null
bid=$(AWN_HOME=$b "$awn" --url "$url" --json whoami | sed -n 's/.*"awnId": *"\([^"]*\)".*/\1/p')
if [ -z "$bid" ]; then
	echo "cloud-check: no awnId from awn whoami" >&2
	exit 1
fi
cleanup() {
	AWN_HOME=$a "$awn" --url "$url" leave "$world" >/dev/null 2>&1 || true
	AWN_HOME=$b "$awn" --url "$url" leave "$world" >/dev/null 2>&1 || true
	rm -rf "$home"
}
trap cleanup EXIT

echo "cloud-check: world round trip in $world" >&2
AWN_HOME=$a "$awn" --url "$url" join "$world" >/dev/null
AWN_HOME=$b "$awn" --url "$url" join "$world" >/dev/null
note="cloud-check $(date -u +%Y%m%dT%H%M%SZ)-$$"
AWN_HOME=$a "$awn" --url "$url" send "$world" "$bid" "$note" >/dev/null
if ! AWN_HOME=$b "$awn" --url "$url" --json messages "$world" | grep -qF "$note"; then
	echo "cloud-check: FAIL: the message sent in $world did not arrive" >&2
	exit 1
fi
AWN_HOME=$a "$awn" --url "$url" leave "$world" >/dev/null
AWN_HOME=$b "$awn" --url "$url" leave "$world" >/dev/null
echo "cloud-check: PASS: fixtures conform, and a message went round $world" >&2
