package ec2capacity

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Service Quotas' codes of the Standard group's vCPU quotas (service code
// ec2): L-1216C47A "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z)
// instances" and L-34B43A08 "All Standard (A, C, D, H, I, M, R, T, Z) Spot
// Instance Requests" (EC2 User Guide, "Amazon EC2 instance type quotas").
// moto's Service Quotas knows only vpc's quotas: the model answers
// GetServiceQuota for these two when a test set their quota, in Service
// Quotas' JSON protocol (X-Amz-Target ServiceQuotasV20190624.GetServiceQuota,
// the answer's Quota holding ServiceCode, QuotaCode, QuotaName, Value, ...).
var quotaCodes = map[string]struct{ class, name string }{
	"L-1216C47A": {OnDemand, "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"},
	"L-34B43A08": {Spot, "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests"},
}

// serveQuota answers a GetServiceQuota of a Standard vCPU quota the test
// set; false leaves the request to moto.
func (m *Model) serveQuota(w http.ResponseWriter, body []byte) bool {
	var in struct{ ServiceCode, QuotaCode string }
	if json.Unmarshal(body, &in) != nil || in.ServiceCode != "ec2" {
		return false
	}
	q, known := quotaCodes[in.QuotaCode]
	if !known {
		return false
	}
	value, set := m.Quota(q.class, "Standard")
	if !set {
		return false
	}
	raw, _ := json.Marshal(map[string]any{"Quota": map[string]any{
		"ServiceCode": "ec2", "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)", "QuotaCode": in.QuotaCode, "QuotaName": q.name,
		"QuotaArn": fmt.Sprintf("arn:aws:servicequotas:us-east-1:123456789012:ec2/%s", in.QuotaCode),
		"Value":    float64(value), "Unit": "None", "Adjustable": true, "GlobalQuota": false,
	}})
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(http.StatusOK)
	w.Write(raw)
	return true
}
