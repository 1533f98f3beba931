package sandbox

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// CloudWatch Logs trouble injected at the front endpoint, answered as the
// service answers (awsJson1_1: the error code in __type): agents' log
// shipping meets throttling, 500s (some after the events were stored) and
// requests that hang, as on an account whose log quotas are shared by many
// instances (PutLogEvents is throttled per account and Region, and per
// stream, with ThrottlingException). Only the writes agents make are
// faulted: CreateLogStream and PutLogEvents.

const logsTarget = "Logs_20140328."

// LogsAnswer is what the endpoint does with one CloudWatch Logs write
// instead of (or besides) passing it to moto; the zero value passes it on.
type LogsAnswer struct {
	Throttle  bool          // 400 ThrottlingException, nothing stored
	Fail      bool          // 500 ServiceUnavailableException, nothing stored
	FailAfter bool          // stored by moto, answered 500 all the same
	Hang      time.Duration // held this long (or until the caller gives up), then 500
}

// faultedLogOps are the CloudWatch Logs operations the Logs fault hook sees.
var faultedLogOps = map[string]bool{"CreateLogStream": true, "PutLogEvents": true}

// serveLogs answers one CloudWatch Logs write under the configured faults.
func serveLogs(w http.ResponseWriter, r *http.Request, body []byte, f Faults, moto http.Handler) {
	ans := f.Logs(strings.TrimPrefix(r.Header.Get("X-Amz-Target"), logsTarget))
	switch {
	case ans.Throttle:
		logsError(w, http.StatusBadRequest, "ThrottlingException", "Rate exceeded")
		return
	case ans.Hang > 0:
		select {
		case <-r.Context().Done(): // the caller's deadline
		case <-time.After(ans.Hang):
		}
		logsError(w, http.StatusInternalServerError, "ServiceUnavailableException", "The service cannot complete the request.")
		return
	case ans.Fail:
		logsError(w, http.StatusInternalServerError, "ServiceUnavailableException", "The service cannot complete the request.")
		return
	}
	res := forward(moto, r, body)
	if ans.FailAfter && res.Code == http.StatusOK {
		logsError(w, http.StatusInternalServerError, "ServiceUnavailableException", "The service cannot complete the request.")
		return
	}
	copyAnswer(w, res)
}

func logsError(w http.ResponseWriter, status int, code, msg string) {
	body, _ := json.Marshal(map[string]string{"__type": code, "message": msg})
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Requestid", fmt.Sprintf("SANDBOXFAULT%020d", faultSeq.Add(1)))
	w.WriteHeader(status)
	w.Write(body)
}
