package sandbox

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
)

// The AccessDenied answer of a refused request, in the error shape of its
// service's protocol and AWS's wording.

// accessDenied answers as the service would: the error shape of its
// protocol, AWS's wording, nothing changed.
func accessDenied(w http.ResponseWriter, req awsRequest, d Denial) {
	because := "because no identity-based policy allows the " + d.Action + " action"
	if len(d.Why) > 0 && d.Why[0] == "ExplicitlyDenied" {
		because = "with an explicit deny in an identity-based policy"
	}
	msg := fmt.Sprintf("User: %s is not authorized to perform: %s on resource: %s %s", d.Principal, d.Action, d.Resource, because)
	switch req.service {
	case "dynamodb", "ssm", "sqs":
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if req.service == "sqs" {
			w.Header().Set("X-Amzn-Query-Error", "AccessDenied;Sender")
		}
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazon.coral.service#AccessDeniedException", "message": msg})
	case "ec2":
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>You are not authorized to perform this operation. %s</Message></Error></Errors><RequestID>sandbox-iam</RequestID></Response>`, xmlEscape(msg))
	case "s3":
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>%s</Message><RequestId>sandbox-iam</RequestId></Error>`, xmlEscape(msg))
	default:
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>%s</Message></Error><RequestId>sandbox-iam</RequestId></ErrorResponse>`, xmlEscape(msg))
	}
}

func xmlEscape(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
