package metrics

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

var at = time.UnixMilli(1795668408123)

func TestARecordIsOneEMFLineCloudWatchCanRead(t *testing.T) {
	var r Record
	r.Dimensions = map[string]string{"function": "provision", "pool": "linux"}
	r.Add("ProvisionSeconds", Seconds, 2.5)
	r.Add("ReadySeconds", Seconds, 1.1, 2.2, 3.3)
	r.Add("PoolHits", Count, 2)
	r.Add("PoolHits", Count, 1) // merged with the first
	out, err := r.Encode(at)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(out, []byte("\n")) != 1 || !bytes.HasSuffix(out, []byte("\n")) {
		t.Fatalf("want one line, got %q", out)
	}
	// The document's shape, as the specification gives it.
	var doc struct {
		AWS struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		Function string    `json:"function"`
		Ready    []float64 `json:"ReadySeconds"`
		Prov     float64   `json:"ProvisionSeconds"`
		Hits     []float64 `json:"PoolHits"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	d := doc.AWS.CloudWatchMetrics
	if doc.AWS.Timestamp != at.UnixMilli() || len(d) != 1 || d[0].Namespace != Namespace ||
		strings.Join(d[0].Dimensions[0], ",") != "function,pool" || len(d[0].Metrics) != 3 {
		t.Fatalf("metadata: %+v", doc.AWS)
	}
	if doc.Function != "provision" || doc.Prov != 2.5 || len(doc.Ready) != 3 || len(doc.Hits) != 2 {
		t.Fatalf("members: %s", out)
	}
	points, err := Read(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if sum, n := Sum(points, "PoolHits", map[string]string{"pool": "linux"}); sum != 3 || n != 2 {
		t.Fatalf("PoolHits read back: sum %v of %d values", sum, n)
	}
	if _, n := Sum(points, "ReadySeconds", map[string]string{"pool": "gpu"}); n != 0 {
		t.Fatal("a dimension that does not match was summed")
	}
}

func TestMoreThanAHundredValuesSpillToAnotherLine(t *testing.T) {
	var r Record
	r.Dimensions = map[string]string{"function": "provision"}
	vals := make([]float64, 250)
	for i := range vals {
		vals[i] = float64(i)
	}
	r.Add("ReadySeconds", Seconds, vals...)
	r.Add("PoolHits", Count, 1)
	out, err := r.Encode(at)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(out, []byte("\n")); n != 3 {
		t.Fatalf("250 values: want 3 lines, got %d", n)
	}
	points, err := Read(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	sum, n := Sum(points, "ReadySeconds", nil)
	if n != 250 || sum != 249*250/2 {
		t.Fatalf("read back %d values summing to %v", n, sum)
	}
	if _, n := Sum(points, "PoolHits", nil); n != 1 {
		t.Fatalf("PoolHits written %d times, want once", n)
	}
}

func TestInvalidRecordsAreRefusedNamingTheRule(t *testing.T) {
	for name, tc := range map[string]struct {
		r    Record
		want string
	}{
		"metric named like a dimension": {Record{Dimensions: map[string]string{"pool": "a"}, Metrics: []Metric{{"pool", Count, []float64{1}}}}, "also a dimension"},
		"unknown unit":                  {Record{Metrics: []Metric{{"X", "Hours", []float64{1}}}}, "unit"},
		"not a number":                  {Record{Metrics: []Metric{{"X", Count, []float64{math.NaN()}}}}, "finite"},
		"empty dimension value":         {Record{Dimensions: map[string]string{"pool": ""}, Metrics: []Metric{{"X", Count, []float64{1}}}}, "non-empty"},
		"one name, two units":           {Record{Metrics: []Metric{{"X", Count, []float64{1}}, {"X", Seconds, []float64{1}}}}, "given in"},
	} {
		if _, err := tc.r.Encode(at); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error saying %q", name, err, tc.want)
		}
	}
}

func TestReadSkipsLogsAndRefusesBrokenEMF(t *testing.T) {
	log := `{"level":"INFO","msg":"invocation done"}
plain text
`
	points, err := Read(strings.NewReader(log))
	if err != nil || len(points) != 0 {
		t.Fatalf("plain logs: %v, %d points", err, len(points))
	}
	broken := `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"ghrunner","Dimensions":[["pool"]],"Metrics":[{"Name":"X","Unit":"Count"}]}]},"X":1}` + "\n"
	if _, err := Read(strings.NewReader(broken)); err == nil || !strings.Contains(err.Error(), "dimension pool") {
		t.Fatalf("a dimension missing from the line: %v", err)
	}
}
