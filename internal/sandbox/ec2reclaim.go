package sandbox

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
)

// Spot capacity EC2 takes back (chaosspot.go). EC2 describes an instance
// it ended that way with the state reason Server.SpotInstanceTermination
// (EC2 API Reference, StateReason) for as long as it shows the terminated
// instance; moto gives every termination the reason of a user's
// (Client.UserInitiatedShutdown). The overlay (ec2states.go) keeps the ids
// the sandbox reclaimed and puts EC2's reason into DescribeInstances
// answers, so refresh can tell an interruption whose agent never said it.

// reclaimReason is the stateReason EC2 gives a reclaimed spot instance.
var reclaimReason = fmt.Sprintf("<stateReason><code>%s</code><message>%s: Spot instance termination</message></stateReason>", fleet.ReasonSpotTermination, fleet.ReasonSpotTermination)

// ReclaimSpot terminates spot instance id as EC2 does when it takes its
// capacity back.
func (s *Sandbox) ReclaimSpot(ctx context.Context, id string) error {
	s.states.reclaim(id)
	_, err := s.AWS.EC2().TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	return err
}

func (st *instanceStates) reclaim(id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.reclaimed == nil {
		st.reclaimed = map[string]bool{}
	}
	st.reclaimed[id] = true
}

var stateReasonRE = regexp.MustCompile(`(?s)<stateReason>.*?</stateReason>`)

// withReasons puts EC2's reason into the answer's reclaimed instances that
// are shutting down or terminated.
func (st *instanceStates) withReasons(answer []byte) []byte {
	st.mu.Lock()
	reclaimed := maps.Clone(st.reclaimed)
	st.mu.Unlock()
	if len(reclaimed) == 0 {
		return answer
	}
	items := instanceItems(answer)
	// From the last item to the first, so the earlier spans stay where
	// they were.
	slices.SortFunc(items, func(a, b instanceItem) int { return b.start - a.start })
	for _, it := range items {
		body := answer[it.start:it.end]
		if !reclaimed[it.id] || !bytes.Contains(body, []byte("<name>terminated</name>")) && !bytes.Contains(body, []byte("<name>shutting-down</name>")) {
			continue
		}
		loc := stateReasonRE.FindIndex(body)
		if loc == nil {
			continue
		}
		answer = slices.Concat(answer[:it.start+loc[0]], []byte(reclaimReason), answer[it.start+loc[1]:])
	}
	return answer
}

// instanceItem is one instance's element in a DescribeInstances answer.
type instanceItem struct {
	id         string
	start, end int
}

// instanceItems finds the instances of a DescribeInstances answer: every
// <item> of an <instancesSet>, by the instanceId it holds. moto does not
// write an instance's members in the model's order (its stateReason comes
// before its instanceId), so the item's bounds are read, not guessed.
func instanceItems(answer []byte) []instanceItem {
	d := xml.NewDecoder(bytes.NewReader(answer))
	var path []string
	var out []instanceItem
	var cur instanceItem
	isItem := func(p []string) bool { return len(p) >= 2 && p[len(p)-1] == "item" && p[len(p)-2] == "instancesSet" }
	for {
		off := int(d.InputOffset())
		tok, err := d.Token()
		if err != nil {
			return out
		}
		switch t := tok.(type) {
		case xml.StartElement:
			path = append(path, t.Name.Local)
			if isItem(path) {
				cur = instanceItem{start: off}
			}
		case xml.CharData:
			if len(path) >= 1 && path[len(path)-1] == "instanceId" && isItem(path[:len(path)-1]) {
				cur.id = string(bytes.TrimSpace(t))
			}
		case xml.EndElement:
			if isItem(path) && cur.id != "" {
				cur.end = int(d.InputOffset())
				out = append(out, cur)
			}
			if len(path) > 0 {
				path = path[:len(path)-1]
			}
		}
	}
}
