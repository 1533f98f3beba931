#!/usr/bin/env bash
# invoke.sh FUNCTION [PAYLOAD_JSON]
#
# Calls a ghrunner function (provision, release) with the AWS CLI, v1 or v2,
# and prints its response. When the function failed, Lambda still answers
# 200 with a FunctionError; this script turns that into a failed step with the
# function's own message (a GitHub ::error annotation). With GITHUB_OUTPUT set,
# the response is also the step output `response`, and provision's label and
# number of runners the outputs `label` and `runners`. action.yml beside it
# runs it as a composite action.
#
# Needs bash, the AWS CLI and python3 (on every GitHub-hosted runner; AWS CLI
# v1 runs on it too), which runs invoke.py beside this script to read and
# write the JSON; jq is not required. Vendored, the action is its three
# files: action.yml, invoke.sh and invoke.py.
#
# Environment:
#   GHRUNNER_ROLE_ARN   a role to assume with the job's OIDC token (the
#       invoker role): the token, asked for with GHRUNNER_ROLE_AUDIENCE
#       (default sts.amazonaws.com, what the role's trust policy wants), goes
#       to a file of its own, and the AWS CLI assumes the role itself
#       (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE); credentials in the
#       environment, which the CLI would prefer, are dropped. The token is
#       asked for again before every call: a throttled call may be sent
#       again minutes later. Empty: the CLI's credentials as they are.
#   GHRUNNER_REGION   the region (AWS_REGION and AWS_DEFAULT_REGION)
#   AWS_ENDPOINT_URL_LAMBDA, AWS_ENDPOINT_URL   another Lambda endpoint (an
#       emulator, the local sandbox, a VPC endpoint), passed as --endpoint-url
#       so that CLI versions which ignore these variables use it as well
#   AWS_MAX_ATTEMPTS   defaults to 1 here: the CLI must not send a call
#       again behind this script's back. Lambda's 429
#       (TooManyRequestsException: the account's or the function's
#       concurrency is used up, before the function runs) is waited out by
#       this script instead, with backoff, for up to GHRUNNER_THROTTLE_WAIT
#       seconds in a row (default 300): provision and release are
#       idempotent per run
#   GHRUNNER_WAIT_SECONDS   (default 60, 1 to 300) no connection waits for
#       minutes: NAT gateways and load balancers drop one idle for 350 s or
#       less, and the job would hang. A provision payload (one with a pool)
#       is sent with waitSeconds: a call for a run already being
#       provisioned answers status "provisioning" within that bound, and
#       this script asks again, printing how far the run got. Every call
#       is given up after GHRUNNER_WAIT_SECONDS + 30 s without an answer
#       (--cli-read-timeout), and one whose connection was lost or given up
#       is asked again: the call that started the run provisions it on
#       (Lambda runs an invocation on when its caller goes), and the next
#       call joins it. The whole wait ends after GHRUNNER_WAIT_LIMIT seconds
#       (default 1200: a provision's own deadline is at most 900 s)
#   AWS_REGION   copied to AWS_DEFAULT_REGION when that is unset (CLI v1)
#   ACTIONS_ID_TOKEN_REQUEST_URL, ACTIONS_ID_TOKEN_REQUEST_TOKEN   set by the
#       Actions runtime in a job with `permissions: id-token: write`: a
#       payload with a runId and no idToken gets the job's OIDC token as
#       idToken, a fresh one for each call, as tokens are short-lived
#       (provision and release bind the run to the job's repository and
#       workflow run with it). Tokens are masked and never printed.
#   GHRUNNER_AUDIENCE   the audience to request the payload's token with
#       (default ghrunner, the module's oidc_audience)
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
here=$(CDPATH='' cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
[ -f "$here/invoke.py" ] || fail "invoke.py is missing beside invoke.sh ($here): the action is action.yml, invoke.sh and invoke.py"
# py COMMAND ARGS: one of invoke.py's commands (it says what each does).
py() { python3 "$here/invoke.py" "$@"; }

# Under RUNNER_TEMP in a job (the runner empties it after the job), and
# removed on exit: the tokens written here never outlive the step.
work=$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/ghrunner.XXXXXX")
trap 'rm -rf "$work"' EXIT
printf '%s' "$payload" > "$work/payload.json"

# job_token AUDIENCE FILE writes the job's OIDC token for AUDIENCE to FILE
# (mode 600; invoke.py token), never an argument nor in the log:
# ::add-mask:: hides it should anything print it later. It fails the step
# when the job may not have a token.
job_token() {
  local message status=0
  message=$(py token "$1" "$2") || status=$?
  case $status in
    0) ;;
    3) fail "$message" ;;
    *) fail "could not get the job's OIDC token (python3 exited $status)" ;;
  esac
  # Registered with the runner as a secret: masked in every later line.
  if [ "${GITHUB_ACTIONS:-}" = "true" ]; then
    printf '::add-mask::%s\n' "$(< "$2")"
  fi
}

# The payload as sent: a provision payload (one with a pool) gets
# waitSeconds (below); one with a runId and no idToken needs the job's
# token for ghrunner's audience, asked for before each call (call_payload).
# Outside Actions (by hand, the sandbox) no token is added.
wait_seconds=${GHRUNNER_WAIT_SECONDS:-60}
case $wait_seconds in
  '' | *[!0-9]*) fail "GHRUNNER_WAIT_SECONDS must be a number of seconds (1 to 300), got $wait_seconds" ;;
esac
# invoke.py prepare prints the waitSeconds the payload goes with (one given
# in the payload wins), which bounds each call's read timeout below.
needs_token=0
wait_sent=$(py prepare "$work/payload.json" "$wait_seconds") || needs_token=$?
case $needs_token in
  0) ;;
  10) [ -n "${ACTIONS_ID_TOKEN_REQUEST_URL:-}" ] || [ "${GITHUB_ACTIONS:-}" = "true" ] || needs_token=0 ;;
  *) fail "could not read the payload (python3 exited $needs_token)" ;;
esac
# call_payload writes the payload of one call to call.json, with a fresh
# job token when it needs one: tokens are short-lived, a provision's calls
# may go on for longer.
call_payload() {
  cp "$work/payload.json" "$work/call.json"
  [ "$needs_token" = 10 ] || return 0
  job_token "${GHRUNNER_AUDIENCE:-ghrunner}" "$work/id-token"
  py add-token "$work/call.json" "$work/id-token" || fail "could not add the job's OIDC token to the payload"
  rm -f "$work/id-token"
}

# The invoker role, assumed by the AWS CLI from a web-identity token file:
# no other action, no credentials in the environment or on disk beyond the
# step. Credentials in the environment would win over the role in the
# CLI's order, so they go.
if [ -n "${GHRUNNER_ROLE_ARN:-}" ]; then
  unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_PROFILE
  export AWS_ROLE_ARN="$GHRUNNER_ROLE_ARN" AWS_WEB_IDENTITY_TOKEN_FILE="$work/web-identity-token"
  # CloudTrail shows the session name: which run assumed the role.
  export AWS_ROLE_SESSION_NAME="ghrunner-${GITHUB_RUN_ID:-manual}-${GITHUB_RUN_ATTEMPT:-1}"
  # The CLI caches the role's credentials under ~/.aws/cli/cache, keyed
  # by role and session name: a HOME of the step's own keeps them from
  # outliving it, and keeps the runner's ~/.aws (profiles, a
  # credential_process) out of the call.
  export HOME="$work/home"
fi
if [ -n "${GHRUNNER_REGION:-}" ]; then
  export AWS_REGION="$GHRUNNER_REGION" AWS_DEFAULT_REGION="$GHRUNNER_REGION"
fi

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

# One call: no read timeout of minutes (see GHRUNNER_WAIT_SECONDS above).
# fileb:// sends the payload's bytes as they are, in AWS CLI v1 and v2 alike
# (v2 would otherwise expect base64 unless given --cli-binary-format
# raw-in-base64-out, an option v1 rejects).
case $wait_sent in
  '' | *[!0-9]*) wait_sent=$wait_seconds ;;
esac
read_timeout=$((wait_sent + 30))
wait_limit=${GHRUNNER_WAIT_LIMIT:-1200}
throttle_limit=${GHRUNNER_THROTTLE_WAIT:-300}
role_token() {
  if [ -n "${GHRUNNER_ROLE_ARN:-}" ]; then
    rm -rf "$HOME" && mkdir -m 700 "$HOME" # each call assumes the role afresh
    job_token "${GHRUNNER_ROLE_AUDIENCE:-sts.amazonaws.com}" "$AWS_WEB_IDENTITY_TOKEN_FILE"
  fi
}
call() {
  role_token && call_payload && aws lambda invoke ${endpoint[@]+"${endpoint[@]}"} --cli-read-timeout "$read_timeout" \
    --function-name "$function_name" --payload "fileb://$work/call.json" \
    "$work/response.json" > "$work/invoke.json" 2> "$work/stderr.txt"
}

# Reads a call's answer (invoke.py answer): prints the message when the
# function failed (exit 3), a progress line when the run is still being
# provisioned (exit 4), the response otherwise, and then writes the outputs.
answer() {
  py answer "$work/invoke.json" "$work/response.json"
}

waited=0
delay=2
while :; do
  if ! call; then
    if grep -q 'TooManyRequestsException' "$work/stderr.txt" && [ "$waited" -lt "$throttle_limit" ]; then
      echo "ghrunner: Lambda throttled the call (429, TooManyRequestsException): sending it again in ${delay}s" >&2
      sleep "$delay"
      waited=$((waited + delay))
      delay=$((delay < 30 ? delay * 2 : 30))
      continue
    fi
    # The connection was reset, or gave no answer within read_timeout:
    # the function runs on, and the call asked again joins what it does.
    if grep -qE 'Read timeout on endpoint|Connection was closed before|Connection reset|ReadTimeoutError|ConnectionClosedError' "$work/stderr.txt" &&
      [ "$SECONDS" -lt "$wait_limit" ]; then
      lost=$(tr -s '\n\t' '  ' < "$work/stderr.txt")
      lost=${lost#"${lost%%[! ]*}"}
      echo "ghrunner: ${SECONDS}s: the call's connection was lost or gave no answer within ${read_timeout}s; asking again (${lost% })" >&2
      waited=0 delay=2
      continue
    fi
    cat "$work/stderr.txt" >&2
    cli_error=$(tr -s '\n\t' '  ' < "$work/stderr.txt")
    cli_error=${cli_error#"${cli_error%%[! ]*}"}
    fail "aws lambda invoke failed: ${cli_error% }"
  fi
  waited=0 delay=2
  status=0
  result=$(answer) || status=$?
  case $status in
    0) printf '%s\n' "$result"; exit 0 ;;
    3) fail "$result" ;;
    4)
      [ "$SECONDS" -lt "$wait_limit" ] || fail "$result; gave up after ${SECONDS}s (GHRUNNER_WAIT_LIMIT)"
      echo "ghrunner: ${SECONDS}s: $result; asking again" >&2 ;;
    *) fail "could not read the response of aws lambda invoke (python3 exited $status)" ;;
  esac
done
