"""invoke.py COMMAND ARGS...: the JSON work of invoke.sh, beside it.

invoke.sh runs the AWS CLI and decides what to do next; this file reads
and writes the JSON it needs (python3 is on every GitHub-hosted runner,
jq is not). Each command answers through its exit code, and prints a
message on stdout for invoke.sh to show:

  token AUDIENCE PATH
      writes the job's OIDC token for AUDIENCE to PATH (mode 600), asked
      of the Actions runtime, so that neither it nor the request token is
      ever an argument (visible to other processes) or in the log. Exit 3:
      the job may not have a token (the message says why).
  prepare PAYLOAD_PATH WAIT_SECONDS
      gives a provision payload (one with a pool) waitSeconds unless it
      has one, and prints the waitSeconds it goes with. Exit 10: it names
      a runId and has no idToken, so each call needs the job's token.
      A payload that is not a JSON object is left as it is: the function
      says what is wrong with it.
  add-token CALL_PATH TOKEN_PATH
      puts the token in TOKEN_PATH into the payload in CALL_PATH as idToken.
  answer INVOKE_PATH RESPONSE_PATH
      reads a call's answer (aws lambda invoke's output and the function's
      response): exit 3 with the message when the function failed, exit 4
      with a progress line when the run is still being provisioned, else
      prints the response and, with GITHUB_OUTPUT set, writes the step's
      outputs (response, and provision's label and runners).
"""

import json
import os
import sys
import urllib.parse
import urllib.request

FAILED = 3
PROVISIONING = 4
NEEDS_TOKEN = 10


def token(audience, path):
    url = os.environ.get("ACTIONS_ID_TOKEN_REQUEST_URL", "")
    request_token = os.environ.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "")
    if not url or not request_token:
        print("no OIDC token for this job: give the job that invokes ghrunner "
              "permissions: id-token: write (a pull request from a fork gets none: see the example workflow)")
        return FAILED
    sep = "&" if "?" in url else "?"
    req = urllib.request.Request(url + sep + "audience=" + urllib.parse.quote(audience, safe=""),
                                 headers={"Authorization": "bearer " + request_token, "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as res:
            value = json.load(res).get("value", "")
    except Exception as e:  # the message names the status, never the tokens
        print("requesting the job's OIDC token (audience %s) failed: %s" % (audience, getattr(e, "code", type(e).__name__)))
        return FAILED
    if not value:
        print("requesting the job's OIDC token: the answer holds no token")
        return FAILED
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(value)
    return 0


def prepare(path, wait):
    wait = int(wait)
    try:
        with open(path) as f:
            payload = json.load(f)
    except ValueError:
        return 0  # not JSON: the function says what is wrong with it
    if not isinstance(payload, dict):
        return 0
    if "pool" in payload and "waitSeconds" not in payload:
        payload["waitSeconds"] = wait
        with open(path, "w") as f:
            json.dump(payload, f, separators=(",", ":"))
    if isinstance(payload.get("waitSeconds"), int):
        print(payload["waitSeconds"])
    if "runId" in payload and "idToken" not in payload:
        return NEEDS_TOKEN
    return 0


def add_token(path, token_path):
    with open(path) as f:
        payload = json.load(f)
    with open(token_path) as f:
        payload["idToken"] = f.read()
    with open(path, "w") as f:
        json.dump(payload, f, separators=(",", ":"))
    return 0


def answer(invoke_path, response_path):
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
        return FAILED
    if body is None:
        print("the response is not JSON: " + raw.strip()[:500])
        return FAILED
    if isinstance(body, dict) and body.get("status") == "provisioning":
        print("run %s (label %s) still provisioning after %ds: %s" % (body.get("runId"), body.get("label"),
              body.get("elapsedSeconds") or 0, body.get("progress") or "no progress reported"))
        return PROVISIONING

    compact = json.dumps(body, separators=(",", ":"))
    print(raw.strip() or compact)
    output = os.environ.get("GITHUB_OUTPUT")
    if output:
        with open(output, "a") as f:
            f.write("response=" + compact + "\n")
            # provision's answer: the label its jobs run on, and how many
            # runners it got (fewer than asked when it accepted minInstanceCount)
            if isinstance(body, dict) and isinstance(body.get("label"), str):
                f.write("label=" + body["label"] + "\n")
            if isinstance(body, dict) and isinstance(body.get("instances"), list):
                f.write("runners=%d\n" % len(body["instances"]))
    return 0


COMMANDS = {"token": token, "prepare": prepare, "add-token": add_token, "answer": answer}

if __name__ == "__main__":
    command = COMMANDS.get(sys.argv[1] if len(sys.argv) > 1 else "")
    if command is None or len(sys.argv) != 4:
        print("usage: invoke.py {%s} ARG ARG" % ",".join(COMMANDS))
        sys.exit(2)
    sys.exit(command(*sys.argv[2:4]))
