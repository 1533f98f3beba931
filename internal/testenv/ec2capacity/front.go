package ec2capacity

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
)

var seq atomic.Int64

// launch answers an instant CreateFleet within the model's limits: one
// CreateFleet to next per override that gets instances (moto launches a
// whole fleet from one override), their instances in one answer, and an
// error for each override EC2 could not fill.
func (m *Model) launch(w http.ResponseWriter, r *http.Request, form url.Values, next http.Handler) {
	ctx := r.Context()
	overrides, err := m.overridesOf(ctx, form)
	if err != nil || len(overrides) == 0 {
		forwardForm(w, r, form, next)
		return
	}
	class := OnDemand
	if form.Get("TargetCapacitySpecification.DefaultTargetCapacityType") == Spot {
		class = Spot
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p, err := m.allocate(ctx, overrides, class, atoi(form.Get("TargetCapacitySpecification.TotalTargetCapacity")))
	if err != nil {
		http.Error(w, "ec2capacity: "+err.Error(), http.StatusInternalServerError)
		return
	}
	answer := fleetAnswer{RequestID: fmt.Sprintf("ec2capacity-%020d", seq.Add(1))}
	for i, o := range overrides {
		if p.counts[i] == 0 {
			continue
		}
		rec := httptest.NewRecorder()
		forwardForm(rec, r, single(form, o, p.counts[i]), next)
		if rec.Code != http.StatusOK {
			copyRecorded(w, rec) // moto refused it: so would EC2 the whole request
			return
		}
		var got fleetAnswer
		if err := xml.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			http.Error(w, "ec2capacity: moto's CreateFleet answer: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if answer.FleetID == "" {
			answer.FleetID = got.FleetID
		}
		answer.Instances = append(answer.Instances, got.Instances...)
		answer.Errors = append(answer.Errors, got.Errors...)
		ids, err := instanceIDs(got.Instances)
		if err != nil {
			http.Error(w, "ec2capacity: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if k := o.instanceType + "@" + o.zone; m.available[k] > 0 {
			m.available[k] = max(m.available[k]-len(ids), 0)
		}
		for _, id := range ids {
			m.launched[id] = launchedInstance{class: class, group: Group(o.instanceType), vcpus: p.vcpus[o.instanceType]}
		}
	}
	if answer.FleetID == "" {
		answer.FleetID = fmt.Sprintf("fleet-%017x", seq.Add(1))
	}
	template := templateXML(form)
	for _, e := range p.errors {
		m.refusals++
		answer.Errors = append(answer.Errors, rawItem{Inner: fmt.Sprintf(
			"<errorCode>%s</errorCode><errorMessage>%s</errorMessage><launchTemplateAndOverrides>%s<overrides><instanceType>%s</instanceType><subnetId>%s</subnetId><availabilityZone>%s</availabilityZone></overrides></launchTemplateAndOverrides><lifecycle>%s</lifecycle>",
			esc(e.code), esc(e.msg), template, esc(e.o.instanceType), esc(e.o.subnet), esc(e.o.zone), class)})
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, answer.xml())
}

// fleetAnswer is a CreateFleet answer, its items kept as moto wrote them.
type fleetAnswer struct {
	RequestID string    `xml:"requestId"`
	FleetID   string    `xml:"fleetId"`
	Errors    []rawItem `xml:"errorSet>item"`
	Instances []rawItem `xml:"fleetInstanceSet>item"`
}

type rawItem struct {
	Inner string `xml:",innerxml"`
}

func (a fleetAnswer) xml() string {
	var b strings.Builder
	b.WriteString(xml.Header)
	fmt.Fprintf(&b, `<CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>%s</requestId><fleetId>%s</fleetId><errorSet>`, esc(a.RequestID), esc(a.FleetID))
	for _, e := range a.Errors {
		b.WriteString("<item>" + e.Inner + "</item>")
	}
	b.WriteString("</errorSet><fleetInstanceSet>")
	for _, i := range a.Instances {
		b.WriteString("<item>" + i.Inner + "</item>")
	}
	b.WriteString("</fleetInstanceSet></CreateFleetResponse>")
	return b.String()
}

// instanceIDs reads the instance ids of fleetInstanceSet items.
func instanceIDs(items []rawItem) ([]string, error) {
	var ids []string
	for _, it := range items {
		var inst struct {
			IDs []string `xml:"instanceIds>item"`
		}
		if err := xml.Unmarshal([]byte("<item>"+it.Inner+"</item>"), &inst); err != nil {
			return nil, fmt.Errorf("moto's fleet instance: %w", err)
		}
		ids = append(ids, inst.IDs...)
	}
	return ids, nil
}

// single is form with o as its only override and n as its target.
func single(form url.Values, o override, n int) url.Values {
	out := url.Values{}
	from := fmt.Sprintf("LaunchTemplateConfigs.1.Overrides.%d.", o.index)
	for k, v := range form {
		if rest, ok := strings.CutPrefix(k, from); ok {
			out["LaunchTemplateConfigs.1.Overrides.1."+rest] = v
			continue
		}
		if !strings.HasPrefix(k, "LaunchTemplateConfigs.1.Overrides.") {
			out[k] = v
		}
	}
	for _, k := range []string{"TotalTargetCapacity", "SpotTargetCapacity", "OnDemandTargetCapacity"} {
		if out.Has("TargetCapacitySpecification." + k) {
			out.Set("TargetCapacitySpecification."+k, strconv.Itoa(n))
		}
	}
	return out
}

// templateXML is the launch template of an error's
// launchTemplateAndOverrides, as the request named it.
func templateXML(form url.Values) string {
	spec := "LaunchTemplateConfigs.1.LaunchTemplateSpecification."
	var b strings.Builder
	b.WriteString("<launchTemplateSpecification>")
	if id := form.Get(spec + "LaunchTemplateId"); id != "" {
		b.WriteString("<launchTemplateId>" + esc(id) + "</launchTemplateId>")
	}
	if name := form.Get(spec + "LaunchTemplateName"); name != "" {
		b.WriteString("<launchTemplateName>" + esc(name) + "</launchTemplateName>")
	}
	b.WriteString("<version>" + esc(form.Get(spec+"Version")) + "</version></launchTemplateSpecification>")
	return b.String()
}

func forwardForm(w http.ResponseWriter, r *http.Request, form url.Values, next http.Handler) {
	body := form.Encode()
	req := r.Clone(r.Context())
	req.Body = io.NopCloser(strings.NewReader(body))
	req.ContentLength = int64(len(body))
	req.Header.Set("Content-Length", strconv.Itoa(len(body)))
	next.ServeHTTP(w, req)
}

func copyRecorded(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, err
}

func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
