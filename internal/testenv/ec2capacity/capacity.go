// Package ec2capacity plays EC2's capacity and the account's vCPU quotas
// in front of moto, which launches whatever it is asked: per instance type
// and Availability Zone, how many instances EC2 can still start; per usage
// class and instance family group, how many vCPUs the account may run. An
// instant CreateFleet beyond them gets what fits and, for each override
// EC2 could not fill, an entry in the answer's Errors, as EC2 answers an
// instant fleet (the CreateFleetError shape: errorCode, errorMessage,
// launchTemplateAndOverrides, lifecycle; EC2 API Reference, CreateFleet and
// CreateFleetError, and the ec2 model of botocore / aws-sdk-go-v2, whose
// CreateFleetOutput holds errorSet and fleetInstanceSet). Nothing is
// limited until a test says so: a Model with no limits passes every request
// through.
//
// The sandbox's front endpoint puts a Model before moto
// (internal/sandbox); a test of the functions can put one before its own.
package ec2capacity

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Usage classes, as CreateFleet's lifecycle names them.
const (
	Spot     = "spot"
	OnDemand = "on-demand"
)

// Model is EC2's capacity and the account's quotas. Safe for concurrent use.
type Model struct {
	ec2 *ec2.Client // moto itself: subnets, instance types, the ledger's states

	mu        sync.Mutex // held for a whole CreateFleet: launches draw in turn
	available map[string]int
	quotas    map[string]int
	launched  map[string]launchedInstance // the "account": what came through the model
	refusals  int
}

type launchedInstance struct {
	class string
	group string
	vcpus int
}

// New returns a Model with no limits; client talks to moto directly.
func New(client *ec2.Client) *Model {
	return &Model{ec2: client, available: map[string]int{}, quotas: map[string]int{}, launched: map[string]launchedInstance{}}
}

// SetAvailable says EC2 can start n more instances of instanceType in az
// (of either usage class); each launch takes from it. Capacity that comes
// back is a later SetAvailable. n < 0 removes the limit.
func (m *Model) SetAvailable(instanceType, az string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n < 0 {
		delete(m.available, instanceType+"@"+az)
		return
	}
	m.available[instanceType+"@"+az] = n
}

// SetQuota sets the account's vCPU quota of a usage class for an instance
// family group (Group); vcpus < 0 removes it. The quota counts the pending
// and running instances launched through the model while it had a limit
// (the "account": a model with no limit passes requests through unseen).
func (m *Model) SetQuota(class, group string, vcpus int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if vcpus < 0 {
		delete(m.quotas, class+"/"+group)
		return
	}
	m.quotas[class+"/"+group] = vcpus
}

// Quota is the vCPU quota of class for group, and whether one is set.
func (m *Model) Quota(class, group string) (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	q, ok := m.quotas[class+"/"+group]
	return q, ok
}

// Refusals is how many overrides the model answered with an error.
func (m *Model) Refusals() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refusals
}

func (m *Model) limited() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.available) > 0 || len(m.quotas) > 0
}

// Group is the On-Demand (and Spot) quota group of an instance type, as
// Service Quotas names the groups: "Running On-Demand Standard (A, C, D,
// H, I, M, R, T, Z) instances", "... F instances", "... G and VT
// instances", "... Inf instances", "... P instances", "... X instances",
// "... DL instances", "... Trn instances", "... HPC instances", "... High
// Memory instances"; Spot: "All Standard (A, C, D, H, I, M, R, T, Z) Spot
// Instance Requests" and the like (EC2 User Guide, "Amazon EC2 instance
// type quotas": On-Demand instance quotas are vCPUs per group).
func Group(instanceType string) string {
	family, _, _ := strings.Cut(strings.ToLower(instanceType), ".")
	for _, g := range []struct{ prefix, group string }{
		{"u-", "High Memory"}, {"inf", "Inf"}, {"dl", "DL"}, {"trn", "Trn"}, {"hpc", "HPC"}, {"vt", "G and VT"},
		{"f", "F"}, {"g", "G and VT"}, {"p", "P"}, {"x", "X"},
	} {
		if strings.HasPrefix(family, g.prefix) {
			return g.group
		}
	}
	return "Standard" // a, c, d, h, i, m, r, t, z
}

// override is one of a CreateFleet's overrides, with its number there.
type override struct {
	index              int
	instanceType, zone string
	subnet             string
}

// Front puts the model before next (moto, or what leads to it): an instant
// CreateFleet that is not a DryRun is launched within the limits, and a
// GetServiceQuota of a Standard vCPU quota that is set is answered
// (servicequotas.go).
func (m *Model) Front(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") == "ServiceQuotasV20190624.GetServiceQuota" {
			body, err := readBody(r)
			if err == nil && m.serveQuota(w, body) {
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") || !m.limited() {
			next.ServeHTTP(w, r)
			return
		}
		body, err := readBody(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		form, _ := url.ParseQuery(string(body))
		if form.Get("Action") != "CreateFleet" || form.Get("Type") != "instant" || form.Get("DryRun") == "true" {
			next.ServeHTTP(w, r)
			return
		}
		m.launch(w, r, form, next)
	})
}

// plan is how many instances each override gets, and the errors of those
// EC2 tried and could not fill.
type plan struct {
	vcpus  map[string]int // of each instance type
	counts []int
	errors []fleetError
}

type fleetError struct {
	o         override
	code, msg string
}

// allocate fills target instances of class from the overrides in order
// (EC2 orders them by its allocation strategy; the model takes the
// request's order), each within its type's capacity in its AZ and the
// class's vCPU quota for the type's group.
func (m *Model) allocate(ctx context.Context, overrides []override, class string, target int) (plan, error) {
	vcpus, err := m.vcpus(ctx, overrides)
	if err != nil {
		return plan{}, err
	}
	used, err := m.used(ctx)
	if err != nil {
		return plan{}, err
	}
	p := plan{vcpus: vcpus, counts: make([]int, len(overrides))}
	left := target
	for i, o := range overrides {
		if left == 0 {
			break
		}
		n, code, msg := left, "", ""
		if avail, ok := m.available[o.instanceType+"@"+o.zone]; ok && avail < n {
			n = avail
			code, msg = "InsufficientInstanceCapacity", insufficientMessage(class, o)
		}
		group := Group(o.instanceType)
		if quota, ok := m.quotas[class+"/"+group]; ok && vcpus[o.instanceType] > 0 {
			if fit := max(quota-used[class+"/"+group], 0) / vcpus[o.instanceType]; fit < n {
				n = fit
				code, msg = quotaError(class, quota)
			}
		}
		p.counts[i] = n
		used[class+"/"+group] += n * vcpus[o.instanceType]
		if n < left {
			p.errors = append(p.errors, fleetError{o: o, code: code, msg: msg})
		}
		left -= n
	}
	return p, nil
}

// insufficientMessage is EC2's InsufficientInstanceCapacity message: for
// On-Demand as EC2's error reference and users quote it, for Spot as
// instant fleets answer it (quoted in karpenter-provider-aws issues).
// InsufficientCapacityMessage is EC2's message for an on-demand
// InsufficientInstanceCapacity of instanceType in zone.
func InsufficientCapacityMessage(instanceType, zone string) string {
	return insufficientMessage(OnDemand, override{instanceType: instanceType, zone: zone})
}

func insufficientMessage(class string, o override) string {
	if class == Spot {
		return "There is no Spot capacity available that matches your request."
	}
	return fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity. You can currently get %s capacity by not specifying an Availability Zone in your request or choosing other Availability Zones.",
		o.instanceType, o.zone, o.instanceType)
}

// quotaError is EC2's answer to a launch beyond the account's quota: for
// On-Demand VcpuLimitExceeded, with the message EC2 gives (as users quote
// it); for Spot MaxSpotInstanceCountExceeded (EC2 API Reference, error
// codes: "You've reached the limit on the number of Spot Instances that
// you can launch").
func quotaError(class string, quota int) (code, msg string) {
	if class == Spot {
		return "MaxSpotInstanceCountExceeded", fmt.Sprintf("Max spot instance count exceeded (the account's Spot vCPU quota of %d)", quota)
	}
	return "VcpuLimitExceeded", fmt.Sprintf("You have requested more vCPU capacity than your current vCPU limit of %d allows for the instance bucket that the specified instance type belongs to. Please visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit.", quota)
}

// vcpus reads the default vCPUs of the overrides' instance types from moto.
func (m *Model) vcpus(ctx context.Context, overrides []override) (map[string]int, error) {
	var asked []types.InstanceType
	seen := map[string]bool{}
	for _, o := range overrides {
		if !seen[o.instanceType] {
			seen[o.instanceType] = true
			asked = append(asked, types.InstanceType(o.instanceType))
		}
	}
	out, err := m.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: asked})
	if err != nil {
		return nil, fmt.Errorf("describe instance types: %w", err)
	}
	vcpus := map[string]int{}
	for _, it := range out.InstanceTypes {
		if it.VCpuInfo != nil {
			vcpus[string(it.InstanceType)] = int(aws.ToInt32(it.VCpuInfo.DefaultVCpus))
		}
	}
	return vcpus, nil
}

// used sums the vCPUs of the model's pending and running instances by
// class/group.
func (m *Model) used(ctx context.Context) (map[string]int, error) {
	used := map[string]int{}
	if len(m.launched) == 0 {
		return used, nil
	}
	ids := make([]string, 0, len(m.launched))
	for id := range m.launched {
		ids = append(ids, id)
	}
	pages := ec2.NewDescribeInstancesPaginator(m.ec2, &ec2.DescribeInstancesInput{InstanceIds: ids})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe the account's instances: %w", err)
		}
		for _, r := range page.Reservations {
			for _, inst := range r.Instances {
				id := aws.ToString(inst.InstanceId)
				if inst.State == nil || (inst.State.Name != types.InstanceStateNamePending && inst.State.Name != types.InstanceStateNameRunning) {
					delete(m.launched, id) // ended: no longer counts
					continue
				}
				l := m.launched[id]
				used[l.class+"/"+l.group] += l.vcpus
			}
		}
	}
	return used, nil
}

// overridesOf reads a CreateFleet's overrides (of its first launch
// template config, the only one the product sends) and their subnets' AZs.
func (m *Model) overridesOf(ctx context.Context, form url.Values) ([]override, error) {
	var out []override
	var subnets []string
	for i := 1; ; i++ {
		key := fmt.Sprintf("LaunchTemplateConfigs.1.Overrides.%d.", i)
		if !form.Has(key+"InstanceType") && !form.Has(key+"SubnetId") {
			break
		}
		o := override{index: i, instanceType: form.Get(key + "InstanceType"), subnet: form.Get(key + "SubnetId"), zone: form.Get(key + "AvailabilityZone")}
		if o.subnet != "" && !slices.Contains(subnets, o.subnet) {
			subnets = append(subnets, o.subnet) // moto answers NotFound for an id named twice
		}
		out = append(out, o)
	}
	if len(subnets) == 0 {
		return out, nil
	}
	sn, err := m.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: subnets})
	if err != nil {
		return nil, fmt.Errorf("describe subnets: %w", err)
	}
	zones := map[string]string{}
	for _, s := range sn.Subnets {
		zones[aws.ToString(s.SubnetId)] = aws.ToString(s.AvailabilityZone)
	}
	for i := range out {
		if z := zones[out[i].subnet]; z != "" {
			out[i].zone = z
		}
	}
	return out, nil
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
