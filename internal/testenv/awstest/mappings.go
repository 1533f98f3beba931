package awstest

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// Lambda's event source mappings are kept by the proxy, never by moto: moto,
// knowing a mapping from a DynamoDB stream, tries to run the function
// itself on every write of the table (it cannot, without docker), then
// empties the stream's shard or fails the write (a TransactWriteItems
// answered with AttributeError reasons). The proxy serves the mapping API
// (create, list, get, delete) in Lambda's REST JSON shapes; Mappings lists
// them for whatever plays them (the sandbox reads the streams).

type mappingStore struct {
	mu   sync.Mutex
	byID map[string]lambdatypes.EventSourceMappingConfiguration
}

// Mappings lists the event source mappings created through the proxy.
func (e *Moto) Mappings() []lambdatypes.EventSourceMappingConfiguration {
	e.mappings.mu.Lock()
	defer e.mappings.mu.Unlock()
	var out []lambdatypes.EventSourceMappingConfiguration
	for _, m := range e.mappings.byID {
		out = append(out, m)
	}
	return out
}

// serveMappings answers a request of the mapping API; false when r is not one.
func (e *Moto) serveMappings(w http.ResponseWriter, r *http.Request) bool {
	const prefix = "/2015-03-31/event-source-mappings"
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok {
		return false
	}
	id := strings.Trim(rest, "/")
	switch {
	case r.Method == http.MethodPost && id == "":
		e.createMapping(w, r)
	case r.Method == http.MethodGet && id == "":
		e.listMappings(w, r)
	case r.Method == http.MethodGet:
		e.getMapping(w, id)
	case r.Method == http.MethodDelete:
		e.deleteMapping(w, id)
	default:
		lambdaError(w, http.StatusBadRequest, "InvalidParameterValueException", "not supported by the test proxy: "+r.Method+" "+r.URL.Path)
	}
	return true
}

// mappingJSON is a mapping as Lambda's API writes it.
type mappingJSON struct {
	UUID                           string                      `json:"UUID"`
	FunctionArn                    string                      `json:"FunctionArn"`
	EventSourceArn                 string                      `json:"EventSourceArn"`
	State                          string                      `json:"State"`
	StartingPosition               string                      `json:"StartingPosition,omitempty"`
	BatchSize                      int32                       `json:"BatchSize,omitempty"`
	MaximumBatchingWindowInSeconds int32                       `json:"MaximumBatchingWindowInSeconds"`
	MaximumRecordAgeInSeconds      int32                       `json:"MaximumRecordAgeInSeconds,omitempty"`
	MaximumRetryAttempts           int32                       `json:"MaximumRetryAttempts,omitempty"`
	BisectBatchOnFunctionError     bool                        `json:"BisectBatchOnFunctionError"`
	FunctionResponseTypes          []string                    `json:"FunctionResponseTypes,omitempty"`
	FilterCriteria                 *lambdatypes.FilterCriteria `json:"FilterCriteria,omitempty"`
	LastModified                   float64                     `json:"LastModified"`
}

func toJSON(m lambdatypes.EventSourceMappingConfiguration) mappingJSON {
	out := mappingJSON{UUID: aws.ToString(m.UUID), FunctionArn: aws.ToString(m.FunctionArn), EventSourceArn: aws.ToString(m.EventSourceArn),
		State: aws.ToString(m.State), StartingPosition: string(m.StartingPosition), BatchSize: aws.ToInt32(m.BatchSize),
		MaximumBatchingWindowInSeconds: aws.ToInt32(m.MaximumBatchingWindowInSeconds), MaximumRecordAgeInSeconds: aws.ToInt32(m.MaximumRecordAgeInSeconds),
		MaximumRetryAttempts: aws.ToInt32(m.MaximumRetryAttempts), BisectBatchOnFunctionError: aws.ToBool(m.BisectBatchOnFunctionError),
		FilterCriteria: m.FilterCriteria, LastModified: float64(aws.ToTime(m.LastModified).Unix())}
	for _, t := range m.FunctionResponseTypes {
		out.FunctionResponseTypes = append(out.FunctionResponseTypes, string(t))
	}
	return out
}

func writeMappingJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func lambdaError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("X-Amzn-Errortype", kind)
	writeMappingJSON(w, status, map[string]string{"Type": "User", "Message": msg, "message": msg})
}

// functionARN is the ARN of a function moto holds, "" when it has none.
func (e *Moto) functionARN(name string) string {
	req, err := http.NewRequest(http.MethodGet, e.MotoURL+"/2015-03-31/functions/"+url.PathEscape(name), nil)
	if err != nil {
		return ""
	}
	// moto picks the service from the credential scope; it checks no signature.
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=testing/20260101/"+Region+"/lambda/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var out struct{ Configuration struct{ FunctionArn string } }
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
		return ""
	}
	return out.Configuration.FunctionArn
}

func (e *Moto) createMapping(w http.ResponseWriter, r *http.Request) {
	var in struct {
		mappingJSON
		FunctionName string `json:"FunctionName"`
		Enabled      *bool  `json:"Enabled"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.FunctionName == "" || in.EventSourceArn == "" {
		lambdaError(w, http.StatusBadRequest, "InvalidParameterValueException", "FunctionName and EventSourceArn are required")
		return
	}
	fnARN := e.functionARN(in.FunctionName)
	if fnARN == "" {
		lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+in.FunctionName)
		return
	}
	raw := make([]byte, 16)
	rand.Read(raw)
	id := hex.EncodeToString(raw)
	m := lambdatypes.EventSourceMappingConfiguration{UUID: aws.String(id), FunctionArn: aws.String(fnARN), EventSourceArn: aws.String(in.EventSourceArn),
		State: aws.String("Enabled"), StartingPosition: lambdatypes.EventSourcePosition(in.StartingPosition), BatchSize: aws.Int32(cmp.Or(in.BatchSize, 100)),
		MaximumBatchingWindowInSeconds: aws.Int32(in.MaximumBatchingWindowInSeconds), MaximumRecordAgeInSeconds: aws.Int32(in.MaximumRecordAgeInSeconds),
		MaximumRetryAttempts: aws.Int32(in.MaximumRetryAttempts), BisectBatchOnFunctionError: aws.Bool(in.BisectBatchOnFunctionError),
		FilterCriteria: in.FilterCriteria, LastModified: aws.Time(time.Now())}
	if in.Enabled != nil && !*in.Enabled {
		m.State = aws.String("Disabled")
	}
	for _, t := range in.FunctionResponseTypes {
		m.FunctionResponseTypes = append(m.FunctionResponseTypes, lambdatypes.FunctionResponseType(t))
	}
	e.mappings.mu.Lock()
	if e.mappings.byID == nil {
		e.mappings.byID = map[string]lambdatypes.EventSourceMappingConfiguration{}
	}
	e.mappings.byID[id] = m
	e.mappings.mu.Unlock()
	writeMappingJSON(w, http.StatusAccepted, toJSON(m))
}

func (e *Moto) listMappings(w http.ResponseWriter, r *http.Request) {
	fn, source := r.URL.Query().Get("FunctionName"), r.URL.Query().Get("EventSourceArn")
	out := []mappingJSON{}
	e.mappings.mu.Lock()
	for _, m := range e.mappings.byID {
		arn := aws.ToString(m.FunctionArn)
		if (fn == "" || fn == arn || strings.HasSuffix(arn, ":function:"+fn)) && (source == "" || source == aws.ToString(m.EventSourceArn)) {
			out = append(out, toJSON(m))
		}
	}
	e.mappings.mu.Unlock()
	writeMappingJSON(w, http.StatusOK, map[string]any{"EventSourceMappings": out})
}

func (e *Moto) getMapping(w http.ResponseWriter, id string) {
	e.mappings.mu.Lock()
	m, ok := e.mappings.byID[id]
	e.mappings.mu.Unlock()
	if !ok {
		lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "The resource you requested does not exist.")
		return
	}
	writeMappingJSON(w, http.StatusOK, toJSON(m))
}

func (e *Moto) deleteMapping(w http.ResponseWriter, id string) {
	e.mappings.mu.Lock()
	m, ok := e.mappings.byID[id]
	delete(e.mappings.byID, id)
	e.mappings.mu.Unlock()
	if !ok {
		lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "The resource you requested does not exist.")
		return
	}
	m.State = aws.String("Deleting")
	writeMappingJSON(w, http.StatusAccepted, toJSON(m))
}
