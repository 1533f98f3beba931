package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/lambdart"
)

// Lambda's Invoke API at the front endpoint: synchronous, Event and DryRun
// invocations of the deployed functions, answered in Lambda's shapes.

// serveInvoke answers as Lambda's Invoke API does: 200 with the function's
// payload and X-Amz-Function-Error when it failed; 202 for Event.
func (s *Sandbox) serveInvoke(w http.ResponseWriter, r *http.Request) {
	name := functionName(r.PathValue("name"))
	payload, err := io.ReadAll(r.Body)
	if err != nil {
		lambdaError(w, http.StatusBadRequest, "InvalidRequestContentException", err.Error())
		return
	}
	if len(payload) == 0 {
		payload = []byte("{}")
	}
	switch r.Header.Get("X-Amz-Invocation-Type") {
	case "DryRun":
		if _, _, err := s.functions.host(r.Context(), name); err != nil {
			s.invokeFailed(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	case "Event":
		if _, _, err := s.functions.host(r.Context(), name); err != nil {
			s.invokeFailed(w, err)
			return
		}
		go s.functions.invoke(context.Background(), name, payload, true)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	s.mu.Lock()
	idle := s.faults.InvokeIdleReset
	s.mu.Unlock()
	if idle > 0 {
		s.serveInvokeIdle(w, r, name, payload, idle)
		return
	}
	res, err := s.functions.invoke(r.Context(), name, payload, false)
	s.answerInvoke(w, res, err)
}

// answerInvoke writes a synchronous invocation's answer.
func (s *Sandbox) answerInvoke(w http.ResponseWriter, res lambdart.Result, err error) {
	if err != nil {
		s.invokeFailed(w, err)
		return
	}
	w.Header().Set("X-Amz-Executed-Version", "$LATEST")
	w.Header().Set("X-Amzn-Requestid", res.RequestID)
	if res.FunctionError != "" {
		w.Header().Set("X-Amz-Function-Error", res.FunctionError)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(res.Payload)
}

func (s *Sandbox) invokeFailed(w http.ResponseWriter, err error) {
	var throttled *errThrottled
	if errors.As(err, &throttled) {
		w.Header().Set("X-Amzn-Errortype", "TooManyRequestsException")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		json.NewEncoder(w).Encode(map[string]string{"Type": "User", "message": throttled.msg, "Reason": throttled.reason})
		return
	}
	if errors.Is(err, errNoFunction) {
		lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+err.Error())
		return
	}
	lambdaError(w, http.StatusInternalServerError, "ServiceException", err.Error())
}

func lambdaError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("X-Amzn-Errortype", typ)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"Type": "User", "Message": msg, "message": msg})
}

// functionName accepts a name, a partial or a full ARN, with a qualifier.
func functionName(s string) string {
	if i := strings.Index(s, ":function:"); i >= 0 {
		s = s[i+len(":function:"):]
	} else if strings.HasPrefix(s, "function:") {
		s = strings.TrimPrefix(s, "function:")
	}
	name, _, _ := strings.Cut(s, ":")
	return name
}
