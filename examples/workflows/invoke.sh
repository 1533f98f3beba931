#!/usr/bin/env bash
# invoke.sh FUNCTION [PAYLOAD_JSON]
#
# Calls a ghrunner function (provision, release) with the AWS CLI, v1 or v2,
# and prints its response. When the function failed, Lambda still answers
# 200 with a FunctionError; this script turns that into a failed step with the
# function's own message (a GitHub ::error annotation). With GITHUB_OUTPUT set,
# the response is also the step output `response`.
#
# Needs bash, the AWS CLI and python3 (on every GitHub-hosted runner; AWS CLI
# v1 runs on it too), which reads the JSON; jq is not required.
#
# Environment:
#   AWS_ENDPOINT_URL_LAMBDA, AWS_ENDPOINT_URL   another Lambda endpoint (an
#       emulator, the local sandbox, a VPC endpoint), passed as --endpoint-url
#       so that CLI versions which ignore these variables use it as well
#   AWS_MAX_ATTEMPTS   defaults to 1 here: provision waits for its runners for
#       minutes, so the CLI must neither time out (--cli-read-timeout 0) nor
#       send the call again behind the first one's back. Lambda's 429
#       (TooManyRequestsException: the account's or the function's
#       concurrency is used up, before the function runs) is waited out by
#       this script instead, with backoff, for up to GHRUNNER_THROTTLE_WAIT
#       seconds (default 300): provision and release are idempotent per run
#   AWS_REGION   copied to AWS_DEFAULT_REGION when that is unset (CLI v1)
#   ACTIONS_ID_TOKEN_REQUEST_URL, ACTIONS_ID_TOKEN_REQUEST_TOKEN   set by the
#       Actions runtime in a job with `permissions: id-token: write`: a
#       payload with a runId and no idToken gets the job's OIDC token as
#       idToken (provision and release bind the run to the job's repository
#       and workflow run with it). The token is masked and never printed.
#   GHRUNNER_AUDIENCE   the audience to request it with (default ghrunner,
#       the module's oidc_audience)
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  echo "usage: invoke.sh FUNCTION [PAYLOAD_JSON]   (e.g. invoke.sh ci-provision '{\"runId\":\"42\",\"pool\":\"linux\"}')" >&2
  exit 2
fi
function_name=$1
payload=${2:-'{}'}

# GitHub workflow commands: the message needs %, CR and LF escaped; a
# property (the title) also : and , (an ARN has colons).
escape_data() {
  local s=${1//%/%25}
  s=${s//$'\r'/%0D}
  printf '%s' "${s//$'\n'/%0A}"
}
escape_property() {
  local s
  s=$(escape_data "$1")
  s=${s//:/%3A}
  printf '%s' "${s//,/%2C}"
}
title="ghrunner $(escape_property "$function_name")"
fail() {
  echo "::error title=${title}::$(escape_data "$1")"
  exit 1
}

command -v python3 > /dev/null 2>&1 || fail "python3 is required to read the function's response"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%s' "$payload" > "$work/payload.json"

# The job's OIDC token, asked of the Actions runtime and put into the
# payload by python3, so that neither it nor the request token ever is an
# argument (visible to other processes) or in the log (::add-mask:: hides
# it should anything print it later).
token_status=0
token_error=$(python3 - "$work/payload.json" <<'PY'
import json, os, sys, urllib.parse, urllib.request

path = sys.argv[1]
try:
    with open(path) as f:
        payload = json.load(f)
except ValueError:
    sys.exit(0)  # not JSON: the function says what is wrong with it
if not isinstance(payload, dict) or "runId" not in payload or "idToken" in payload:
    sys.exit(0)  # not a provision or release of a run, or signed already
url = os.environ.get("ACTIONS_ID_TOKEN_REQUEST_URL", "")
request_token = os.environ.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "")
if not url or not request_token:
    if os.environ.get("GITHUB_ACTIONS") == "true":
        print("no OIDC token for this job: give the job that invokes ghrunner "
              "permissions: id-token: write (provision and release need the job's token)")
        sys.exit(3)
    sys.exit(0)  # outside Actions: the payload goes as given
audience = os.environ.get("GHRUNNER_AUDIENCE") or "ghrunner"
sep = "&" if "?" in url else "?"
req = urllib.request.Request(url + sep + "audience=" + urllib.parse.quote(audience, safe=""),
                             headers={"Authorization": "bearer " + request_token, "Accept": "application/json"})
try:
    with urllib.request.urlopen(req, timeout=60) as res:
        value = json.load(res).get("value", "")
except Exception as e:  # the message names the status, never the tokens
    print("requesting the job's OIDC token failed: %s" % getattr(e, "code", type(e).__name__))
    sys.exit(3)
if not value:
    print("requesting the job's OIDC token: the answer holds no token")
    sys.exit(3)
with open(os.path.join(os.path.dirname(path), "token"), "w") as f:
    f.write(value)  # for the mask below; the folder is the script's own
payload["idToken"] = value
with open(path, "w") as f:
    json.dump(payload, f, separators=(",", ":"))
PY
) || token_status=$?
case $token_status in
  0)
    # Registered with the runner as a secret: masked in every later line.
    if [ -f "$work/token" ] && [ "${GITHUB_ACTIONS:-}" = "true" ]; then
      printf '::add-mask::%s\n' "$(< "$work/token")"
    fi
    rm -f "$work/token" ;;
  3) fail "$token_error" ;;
  *) fail "could not add the job's OIDC token to the payload (python3 exited $token_status)" ;;
esac

# ${endpoint[@]+...} below: an empty array under set -u fails in bash 3 (macOS).
endpoint=()
if [ -n "${AWS_ENDPOINT_URL_LAMBDA:-}" ]; then
  endpoint=(--endpoint-url "$AWS_ENDPOINT_URL_LAMBDA")
elif [ -n "${AWS_ENDPOINT_URL:-}" ]; then
  endpoint=(--endpoint-url "$AWS_ENDPOINT_URL")
fi
export AWS_MAX_ATTEMPTS="${AWS_MAX_ATTEMPTS:-1}"
# AWS CLI v1 reads the region from AWS_DEFAULT_REGION only.
if [ -n "${AWS_REGION:-}" ] && [ -z "${AWS_DEFAULT_REGION:-}" ]; then
  export AWS_DEFAULT_REGION="$AWS_REGION"
fi

# fileb:// sends the payload's bytes as they are, in AWS CLI v1 and v2 alike
# (v2 would otherwise expect base64 unless given --cli-binary-format
# raw-in-base64-out, an option v1 rejects).
throttle_limit=${GHRUNNER_THROTTLE_WAIT:-300}
waited=0
delay=2
until aws lambda invoke ${endpoint[@]+"${endpoint[@]}"} --cli-read-timeout 0 \
  --function-name "$function_name" --payload "fileb://$work/payload.json" \
  "$work/response.json" > "$work/invoke.json" 2> "$work/stderr.txt"; do
  if grep -q 'TooManyRequestsException' "$work/stderr.txt" && [ "$waited" -lt "$throttle_limit" ]; then
    echo "ghrunner: Lambda throttled the call (429, TooManyRequestsException): sending it again in ${delay}s" >&2
    sleep "$delay"
    waited=$((waited + delay))
    delay=$((delay < 30 ? delay * 2 : 30))
    continue
  fi
  cat "$work/stderr.txt" >&2
  cli_error=$(tr -s '\n\t' '  ' < "$work/stderr.txt")
  cli_error=${cli_error#"${cli_error%%[! ]*}"}
  fail "aws lambda invoke failed: ${cli_error% }"
done

# Prints the message when the function failed (exit 3), the response
# otherwise; writes the response output.
status=0
result=$(python3 - "$work/invoke.json" "$work/response.json" <<'PY'
import json, os, sys

invoke_path, response_path = sys.argv[1:3]

try:
    with open(invoke_path) as f:
        invoke = json.load(f)
except ValueError:
    invoke = {}  # nothing on stdout: some CLI versions and emulators
with open(response_path) as f:
    raw = f.read()

try:
    body = json.loads(raw) if raw.strip() else {}
except ValueError:
    body = None

error = isinstance(invoke, dict) and invoke.get("FunctionError")
if error or (isinstance(body, dict) and "errorMessage" in body):
    message = body.get("errorMessage") if isinstance(body, dict) else None
    print(str(message or raw.strip() or error))
    sys.exit(3)
if body is None:
    print("the response is not JSON: " + raw.strip()[:500])
    sys.exit(3)

compact = json.dumps(body, separators=(",", ":"))
print(raw.strip() or compact)
output = os.environ.get("GITHUB_OUTPUT")
if output:
    with open(output, "a") as f:
        f.write("response=" + compact + "\n")
PY
) || status=$?
case $status in
  0) printf '%s\n' "$result" ;;
  3) fail "$result" ;;
  *) fail "could not read the response of aws lambda invoke (python3 exited $status)" ;;
esac
