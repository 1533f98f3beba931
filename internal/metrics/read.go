package metrics

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Point is one metric of one EMF line, read back: what CloudWatch would
// extract from it.
type Point struct {
	Name       string
	Unit       Unit
	Dimensions map[string]string
	Values     []float64
	At         time.Time
}

// Read returns the metrics of every EMF line in a log; other lines (JSON
// logs without "_aws", text) are skipped. A line that claims to be EMF but
// breaks the format is an error naming the line, as CloudWatch would drop it.
func Read(r io.Reader) ([]Point, error) {
	var points []Point
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"_aws"`)) {
			continue
		}
		p, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		points = append(points, p...)
	}
	return points, sc.Err()
}

func parseLine(line []byte) ([]Point, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(line, &doc); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	var meta struct {
		Timestamp         *int64      `json:"Timestamp"`
		CloudWatchMetrics []directive `json:"CloudWatchMetrics"`
	}
	if err := json.Unmarshal(doc["_aws"], &meta); err != nil {
		return nil, fmt.Errorf("_aws: %v", err)
	}
	if meta.Timestamp == nil {
		return nil, fmt.Errorf("_aws.Timestamp: required")
	}
	if len(meta.CloudWatchMetrics) == 0 {
		return nil, fmt.Errorf("_aws.CloudWatchMetrics: required")
	}
	var points []Point
	for _, d := range meta.CloudWatchMetrics {
		if d.Namespace == "" {
			return nil, fmt.Errorf("CloudWatchMetrics: Namespace required")
		}
		dims := map[string]string{}
		for _, set := range d.Dimensions {
			if len(set) > maxDimensions {
				return nil, fmt.Errorf("a dimension set of %d: at most %d", len(set), maxDimensions)
			}
			for _, k := range set {
				var v string
				if err := json.Unmarshal(doc[k], &v); err != nil {
					return nil, fmt.Errorf("dimension %s: not a string member of the line", k)
				}
				dims[k] = v
			}
		}
		if len(d.Metrics) > maxMetrics {
			return nil, fmt.Errorf("%d metrics in a directive: at most %d", len(d.Metrics), maxMetrics)
		}
		for _, m := range d.Metrics {
			raw, ok := doc[m.Name]
			if !ok {
				return nil, fmt.Errorf("metric %s: no member of that name", m.Name)
			}
			var vals []float64
			var one float64
			if err := json.Unmarshal(raw, &one); err == nil {
				vals = []float64{one}
			} else if err := json.Unmarshal(raw, &vals); err != nil || len(vals) == 0 || len(vals) > maxValues {
				return nil, fmt.Errorf("metric %s: a number or an array of 1 to %d numbers, got %s", m.Name, maxValues, raw)
			}
			points = append(points, Point{Name: m.Name, Unit: m.Unit, Dimensions: dims, Values: vals, At: time.UnixMilli(*meta.Timestamp)})
		}
	}
	return points, nil
}

// Sum adds every value of the named metric whose dimensions include match.
func Sum(points []Point, name string, match map[string]string) (sum float64, n int) {
	for _, p := range points {
		if p.Name != name || !includes(p.Dimensions, match) {
			continue
		}
		for _, v := range p.Values {
			sum += v
			n++
		}
	}
	return sum, n
}

func includes(dims, match map[string]string) bool {
	for k, v := range match {
		if dims[k] != v {
			return false
		}
	}
	return true
}
