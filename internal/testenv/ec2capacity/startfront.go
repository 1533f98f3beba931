package ec2capacity

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// StartFront answers a StartInstances the model refuses (StartRefusal) as
// EC2's query API answers a refused request — HTTP 400 with
// <Response><Errors><Error><Code/><Message/></Error></Errors><RequestID/>,
// the shape aws-sdk-go-v2's ec2query protocol decodes — and passes every
// other request to next. For tests that play starts without the sandbox,
// whose own EC2 front asks StartRefusal itself.
func (m *Model) StartFront(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
			next.ServeHTTP(w, r)
			return
		}
		body, err := readBody(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		form, _ := url.ParseQuery(string(body))
		if form.Get("Action") != "StartInstances" || form.Get("DryRun") == "true" {
			next.ServeHTTP(w, r)
			return
		}
		var ids []string
		for i := 1; form.Has(fmt.Sprintf("InstanceId.%d", i)); i++ {
			ids = append(ids, form.Get(fmt.Sprintf("InstanceId.%d", i)))
		}
		code, msg, err := m.StartRefusal(r.Context(), ids)
		switch {
		case err != nil:
			http.Error(w, "ec2capacity: "+err.Error(), http.StatusInternalServerError)
		case code != "":
			w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>ec2capacity-%020d</RequestID></Response>`,
				esc(code), esc(msg), seq.Add(1))
		default:
			next.ServeHTTP(w, r)
		}
	})
}
