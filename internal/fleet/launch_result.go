package fleet

import (
	"fmt"
	"sort"
	"strings"
)

// What a launch got: the instances EC2 started, the errors it reported per
// override, and the summaries callers and the launch itself read of them.

// Launched is one instance EC2 started.
type Launched struct {
	InstanceID   string
	InstanceType string
	SubnetID     string
	AZ           string // empty when neither CreateFleet nor DescribeInstances said
	UsageClass   string // what EC2 delivered: Spot or OnDemand
}

// LaunchError is one error CreateFleet reported for an override.
type LaunchError struct {
	Code         string
	Message      string
	InstanceType string
	SubnetID     string
	UsageClass   string
}

// LaunchResult is what a launch got. Fewer instances than asked for is not
// an error: Errors says why.
type LaunchResult struct {
	Instances []Launched
	Errors    []LaunchError
	// Warnings are problems that did not stop the launch, such as volumes
	// left untagged.
	Warnings []string
}

// Missing is how many of count the launch did not get.
func (r LaunchResult) Missing(count int) int { return max(count-len(r.Instances), 0) }

// Detail summarises Errors in one line for a message: each distinct
// code/type/subnet/class once, sorted, then the message of each error
// that is not about capacity, once.
func (r LaunchResult) Detail() string {
	seen := map[string]bool{}
	var parts []string
	for _, e := range r.Errors {
		s := fmt.Sprintf("%s (%s in %s, %s)", e.Code, e.InstanceType, e.SubnetID, e.UsageClass)
		if !seen[s] {
			seen[s] = true
			parts = append(parts, s)
		}
	}
	sort.Strings(parts)
	// A capacity code says it all; any other needs EC2's words, once.
	var why []string
	for _, e := range r.Errors {
		s := e.Code + ": " + e.Message
		if IsProfilePropagation(e.Code, e.Message) {
			s += " (EC2 does not know the launch template's instance profile: IAM made it moments ago and " +
				"the launch waited ProfileWait for it, or the profile was deleted)"
		}
		if !IsEC2CapacityShortageCode(e.Code) && e.Message != "" && !seen[s] {
			seen[s] = true
			why = append(why, s)
		}
	}
	sort.Strings(why)
	return strings.Join(append(parts, why...), "; ")
}

func (r LaunchResult) ids() []string {
	ids := make([]string, len(r.Instances))
	for i, inst := range r.Instances {
		ids[i] = inst.InstanceID
	}
	return ids
}

func (r LaunchResult) capacityShort() bool {
	for _, e := range r.Errors {
		if IsEC2CapacityShortageCode(e.Code) {
			return true
		}
	}
	return false
}
