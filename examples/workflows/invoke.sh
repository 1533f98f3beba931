#!/usr/bin/env bash
# invoke.sh FUNCTION [PAYLOAD_JSON]
#
# Calls a ghrunner function (provision, release) with the AWS CLI, v1 or v2,
# and prints its response. When the function failed, Lambda still answers
# 200 with a FunctionError; this script turns that into a failed step with the
# function's own message (a GitHub ::error annotation). With GITHUB_OUTPUT set,
# the response is also the step output `response`.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  echo "usage: invoke.sh FUNCTION [PAYLOAD_JSON]   (e.g. invoke.sh ci-provision '{\"runId\":\"42\",\"pool\":\"linux\"}')" >&2
  exit 2
fi
function_name=$1
payload=${2:-'{}'}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%s' "$payload" > "$work/payload.json"

# fileb:// sends the bytes as they are, in AWS CLI v1 and v2 alike.
if ! aws lambda invoke --function-name "$function_name" --payload "fileb://$work/payload.json" \
  "$work/response.json" > "$work/invoke.json" 2> "$work/stderr.txt"; then
  message=$(tr '\n' ' ' < "$work/stderr.txt")
  echo "::error title=ghrunner ${function_name}::aws lambda invoke failed: ${message}"
  exit 1
fi

python3 - "$function_name" "$work/invoke.json" "$work/response.json" <<'PY'
import json, os, sys

function_name, invoke_path, response_path = sys.argv[1:4]

def annotation(text):
    # GitHub workflow commands need %, CR and LF escaped.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

with open(invoke_path) as f:
    invoke = json.load(f)
with open(response_path) as f:
    raw = f.read()

if invoke.get("FunctionError"):
    try:
        body = json.loads(raw)
        message = body.get("errorMessage") or raw
    except (ValueError, AttributeError):
        message = raw
    print(f"::error title=ghrunner {function_name}::{annotation(message.strip())}")
    sys.exit(1)

print(raw)
output = os.environ.get("GITHUB_OUTPUT")
if output:
    compact = json.dumps(json.loads(raw), separators=(",", ":")) if raw.strip() else "{}"
    with open(output, "a") as f:
        f.write(f"response={compact}\n")
PY
