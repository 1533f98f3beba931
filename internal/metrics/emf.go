// Package metrics writes CloudWatch metrics as log lines in the embedded
// metric format (EMF). Lambda sends a function's stdout to CloudWatch Logs,
// which extracts the metrics from such lines: no PutMetricData call, no
// extra permission, no extra request on the function's path.
//
// The format (CloudWatch's "Specification: Embedded metric format"): one
// JSON object per line whose "_aws" member holds a millisecond Timestamp
// and CloudWatchMetrics, a list of directives naming a Namespace, the
// dimension sets (lists of root member names whose values are strings) and
// the metrics (root member names with a Unit). A metric's value is a number
// or an array of up to 100 numbers; an array keeps every value, so
// CloudWatch computes percentiles over them. A dimension set holds at most
// 30 dimensions, a directive at most 100 metrics.
//
// Invariant: what Encode returns is valid EMF or an error naming what is
// wrong; nothing invalid reaches the log, where CloudWatch would drop the
// whole line without a word.
package metrics

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// Namespace is the CloudWatch namespace of every ghrunner metric.
const Namespace = "ghrunner"

// Unit is a CloudWatch unit; ghrunner uses these three.
type Unit string

const (
	Seconds Unit = "Seconds"
	Count   Unit = "Count"
	None    Unit = "None"
)

// Limits of the format.
const (
	maxDimensions = 30
	maxMetrics    = 100
	maxValues     = 100
)

// Metric is one named series with its values in this record. Several
// values of one metric (each instance's time to ready, say) keep their
// distribution: CloudWatch's p50/p95 are computed over them.
type Metric struct {
	Name   string
	Unit   Unit
	Values []float64
}

// Record is a set of metrics sharing one set of dimensions, written as one
// line (or more, when a metric has more than 100 values).
type Record struct {
	Dimensions map[string]string
	Metrics    []Metric
}

// Add appends values of a metric to the record.
func (r *Record) Add(name string, unit Unit, values ...float64) {
	r.Metrics = append(r.Metrics, Metric{Name: name, Unit: unit, Values: values})
}

type directive struct {
	Namespace  string       `json:"Namespace"`
	Dimensions [][]string   `json:"Dimensions"`
	Metrics    []definition `json:"Metrics"`
}

type definition struct {
	Name string `json:"Name"`
	Unit Unit   `json:"Unit"`
}

// Encode renders the record as EMF lines, each ending in a newline. A
// metric without values is left out; a record without any values gives
// no line.
func (r Record) Encode(at time.Time) ([]byte, error) {
	dims := make([]string, 0, len(r.Dimensions))
	for k, v := range r.Dimensions {
		if k == "" || k == "_aws" || v == "" {
			return nil, fmt.Errorf("metrics: dimension %q=%q: names and values must be non-empty and the name not _aws", k, v)
		}
		dims = append(dims, k)
	}
	sort.Strings(dims)
	if len(dims) > maxDimensions {
		return nil, fmt.Errorf("metrics: %d dimensions: at most %d", len(dims), maxDimensions)
	}
	// Merge repeated names: one member per metric in a line.
	var names []string
	merged := map[string]*Metric{}
	for _, m := range r.Metrics {
		if m.Name == "" || m.Name == "_aws" {
			return nil, fmt.Errorf("metrics: metric name %q: must be non-empty and not _aws", m.Name)
		}
		if _, clash := r.Dimensions[m.Name]; clash {
			return nil, fmt.Errorf("metrics: metric %q: also a dimension name", m.Name)
		}
		switch m.Unit {
		case Seconds, Count, None:
		default:
			return nil, fmt.Errorf("metrics: metric %q: unit %q is not one of Seconds, Count, None", m.Name, m.Unit)
		}
		for _, v := range m.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("metrics: metric %q: %v is not a finite number", m.Name, v)
			}
		}
		if prev, ok := merged[m.Name]; ok {
			if prev.Unit != m.Unit {
				return nil, fmt.Errorf("metrics: metric %q: given in %s and in %s", m.Name, prev.Unit, m.Unit)
			}
			prev.Values = append(prev.Values, m.Values...)
			continue
		}
		c := Metric{Name: m.Name, Unit: m.Unit, Values: slices.Clone(m.Values)}
		merged[m.Name] = &c
		names = append(names, m.Name)
	}
	if len(names) > maxMetrics {
		return nil, fmt.Errorf("metrics: %d metrics in one record: at most %d", len(names), maxMetrics)
	}
	var out []byte
	// Line i carries values [i*100, (i+1)*100) of every metric.
	for line := 0; ; line++ {
		doc := map[string]any{}
		var defs []definition
		for _, n := range names {
			m := merged[n]
			lo := line * maxValues
			if lo >= len(m.Values) {
				continue
			}
			vals := m.Values[lo:min(lo+maxValues, len(m.Values))]
			defs = append(defs, definition{Name: n, Unit: m.Unit})
			if len(vals) == 1 {
				doc[n] = vals[0]
			} else {
				doc[n] = vals
			}
		}
		if len(defs) == 0 {
			return out, nil
		}
		for k, v := range r.Dimensions {
			doc[k] = v
		}
		doc["_aws"] = map[string]any{
			"Timestamp":         at.UnixMilli(),
			"CloudWatchMetrics": []directive{{Namespace: Namespace, Dimensions: [][]string{dims}, Metrics: defs}},
		}
		b, err := json.Marshal(doc)
		if err != nil {
			return nil, err
		}
		out = append(append(out, b...), '\n')
	}
}
