package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// The front endpoint serves Lambda's event source mapping API (create, list,
// get, delete) from the streams component, in Lambda's REST JSON shapes.

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

func (s *Sandbox) serveCreateMapping(w http.ResponseWriter, r *http.Request) {
	var in struct {
		mappingJSON
		FunctionName string `json:"FunctionName"`
		Enabled      *bool  `json:"Enabled"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.FunctionName == "" || in.EventSourceArn == "" {
		lambdaError(w, http.StatusBadRequest, "InvalidParameterValueException", "FunctionName and EventSourceArn are required")
		return
	}
	fn, err := s.AWS.Lambda().GetFunction(r.Context(), &lambda.GetFunctionInput{FunctionName: aws.String(in.FunctionName)})
	if err != nil {
		lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+in.FunctionName)
		return
	}
	raw := make([]byte, 16)
	rand.Read(raw)
	id := hex.EncodeToString(raw)
	m := lambdatypes.EventSourceMappingConfiguration{UUID: aws.String(id), FunctionArn: fn.Configuration.FunctionArn, EventSourceArn: aws.String(in.EventSourceArn),
		State: aws.String("Enabled"), StartingPosition: lambdatypes.EventSourcePosition(in.StartingPosition), BatchSize: aws.Int32(max(in.BatchSize, 100*boolInt(in.BatchSize == 0))),
		MaximumBatchingWindowInSeconds: aws.Int32(in.MaximumBatchingWindowInSeconds), MaximumRecordAgeInSeconds: aws.Int32(in.MaximumRecordAgeInSeconds),
		MaximumRetryAttempts: aws.Int32(in.MaximumRetryAttempts), BisectBatchOnFunctionError: aws.Bool(in.BisectBatchOnFunctionError),
		FilterCriteria: in.FilterCriteria, LastModified: aws.Time(time.Now())}
	if in.Enabled != nil && !*in.Enabled {
		m.State = aws.String("Disabled")
	}
	for _, t := range in.FunctionResponseTypes {
		m.FunctionResponseTypes = append(m.FunctionResponseTypes, lambdatypes.FunctionResponseType(t))
	}
	s.streams.mu.Lock()
	s.streams.mappings[id] = m
	s.streams.mu.Unlock()
	writeMappingJSON(w, http.StatusAccepted, toJSON(m))
}

func boolInt(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

func (s *Sandbox) serveListMappings(w http.ResponseWriter, r *http.Request) {
	fn, source := r.URL.Query().Get("FunctionName"), r.URL.Query().Get("EventSourceArn")
	out := []mappingJSON{}
	s.streams.mu.Lock()
	for _, m := range s.streams.mappings {
		arn := aws.ToString(m.FunctionArn)
		if (fn == "" || fn == arn || strings.HasSuffix(arn, ":function:"+fn)) && (source == "" || source == aws.ToString(m.EventSourceArn)) {
			out = append(out, toJSON(m))
		}
	}
	s.streams.mu.Unlock()
	writeMappingJSON(w, http.StatusOK, map[string]any{"EventSourceMappings": out})
}

func (s *Sandbox) serveGetMapping(w http.ResponseWriter, r *http.Request) {
	s.streams.mu.Lock()
	m, ok := s.streams.mappings[r.PathValue("uuid")]
	s.streams.mu.Unlock()
	if !ok {
		lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "The resource you requested does not exist.")
		return
	}
	writeMappingJSON(w, http.StatusOK, toJSON(m))
}

func (s *Sandbox) serveDeleteMapping(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("uuid")
	s.streams.mu.Lock()
	m, ok := s.streams.mappings[id]
	delete(s.streams.mappings, id)
	delete(s.streams.pollers, id)
	s.streams.mu.Unlock()
	if !ok {
		lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "The resource you requested does not exist.")
		return
	}
	m.State = aws.String("Deleting")
	writeMappingJSON(w, http.StatusAccepted, toJSON(m))
}
