package main

import (
	"maps"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/ec2capacity"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/lambdart"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
)

// Issue 37 item 5: capacity and quota errors no longer end a run at once.
// The provision function talks to EC2 through the capacity model
// (internal/testenv/ec2capacity), which answers an instant CreateFleet
// beyond a type's capacity in an AZ, or beyond the account's vCPU quota,
// with per-override errors as EC2 does.

// withCapacity gives the deployment's pool a second subnet (us-east-1b) and
// puts a capacity model between the provision function and moto.
func (d *deployment) withCapacity() *ec2capacity.Model {
	d.t.Helper()
	ec := d.aws.EC2()
	first, err := ec.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: d.pool.SubnetIDs[:1]})
	must(d.t, err)
	sn, err := ec.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: first.Subnets[0].VpcId, CidrBlock: aws.String("10.1.2.0/24"), AvailabilityZone: aws.String("us-east-1b")})
	must(d.t, err)
	d.pool.SubnetIDs = []string{d.pool.SubnetIDs[0], aws.ToString(sn.Subnet.SubnetId)}
	d.pool.SubnetZones = map[string]string{d.pool.SubnetIDs[0]: "us-east-1a", d.pool.SubnetIDs[1]: "us-east-1b"}
	must(d.t, d.store.PutPoolConfig(ctx, d.pool))

	model := ec2capacity.New(ec)
	target, _ := url.Parse(env.URL)
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = target.Host }}
	front := httptest.NewServer(model.Front(proxy))
	d.t.Cleanup(front.Close)
	spec := d.fnSpec("provision")
	spec.Env = maps.Clone(spec.Env)
	spec.Env["AWS_ENDPOINT_URL"] = front.URL
	host, err := lambdart.New(spec)
	must(d.t, err)
	d.t.Cleanup(host.Close)
	d.fns["provision"] = host
	return model
}

// none sets every pool of the deployment's types in both AZs to no capacity.
func none(m *ec2capacity.Model, types ...string) {
	for _, it := range types {
		for _, az := range []string{"us-east-1a", "us-east-1b"} {
			m.SetAvailable(it, az, 0)
		}
	}
}

func TestProvisionGetsItsRunnersFromAnotherTypeAndAZWhenEC2LacksTheFirst(t *testing.T) {
	t.Parallel()
	d := deploy(t, nil)
	model := d.withCapacity()
	none(model, "c7i.large")
	model.SetAvailable("m7i.large", "us-east-1a", 0)
	var out provisionOut
	d.call("provision", map[string]any{"runId": "elsewhere", "pool": "linux", "instanceCount": 2}, &out)
	if out.Status != "ready" || out.Created != 2 {
		t.Fatalf("provision = %+v, want 2 created", out)
	}
	for _, inst := range out.Instances {
		if inst.InstanceType != "m7i.large" {
			t.Fatalf("got a %s where EC2 had only m7i.large in us-east-1b: %+v", inst.InstanceType, out.Instances)
		}
	}
	if model.Refusals() == 0 {
		t.Fatal("the model refused no override: the test did not meet InsufficientInstanceCapacity")
	}
}

// Checked: with the retry disabled (retryable answering false), the
// provision fails at once with "EC2 launched 0 of 2 instances:
// InsufficientInstanceCapacity ..." and this test fails.
func TestProvisionGetsItsRunnersOnceCapacityReturnsWithinItsDeadline(t *testing.T) {
	t.Parallel()
	d := deploy(t, nil)
	model := d.withCapacity()
	none(model, "c7i.large", "m7i.large")
	go func() {
		time.Sleep(4 * time.Second)
		model.SetAvailable("m7i.large", "us-east-1a", 1) // one comes back
		time.Sleep(4 * time.Second)
		model.SetAvailable("c7i.large", "us-east-1b", -1) // then plenty
	}()
	start := time.Now()
	var out provisionOut
	d.call("provision", map[string]any{"runId": "returns", "pool": "linux", "instanceCount": 2, "timeoutSeconds": 100}, &out)
	if out.Status != "ready" || out.Created != 2 || len(out.Instances) != 2 {
		t.Fatalf("provision = %+v, want 2 created once capacity came back", out)
	}
	if time.Since(start) < 4*time.Second {
		t.Fatalf("ready after %s: EC2 had no capacity for the first 4 s", time.Since(start))
	}
	// Never more than asked: the retries asked only for what was missing.
	if live := d.live(); len(live) != 2 {
		t.Fatalf("%d instances live for a run of 2", len(live))
	}
	if model.Refusals() == 0 {
		t.Fatal("the model refused no override")
	}
}

// Checked: with the retry disabled, the run fails at once with "EC2
// launched 1 of 2 instances: VcpuLimitExceeded (... in subnet-…)", naming
// neither the AZs nor the launches, and this test fails.
func TestProvisionBeyondTheVCPUQuotaFailsNamingWhatWasTriedAndTheQuota(t *testing.T) {
	t.Parallel()
	d := deploy(t, nil)
	model := d.withCapacity()
	model.SetQuota(ec2capacity.OnDemand, "Standard", 2) // one c7i.large or m7i.large
	res := d.invoke("provision", map[string]any{"runId": "quota", "pool": "linux", "instanceCount": 2, "timeoutSeconds": 45})
	if res.FunctionError == "" {
		t.Fatalf("provision beyond the quota succeeded: %s", res.Payload)
	}
	msg := string(res.Payload)
	for _, want := range []string{"did not give 1 of 2 instances", "launches over", "c7i.large, m7i.large", "us-east-1a", "us-east-1b", "on-demand", "VcpuLimitExceeded", "vCPU limit of 2"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the run's error does not say %q: %s", want, msg)
		}
	}
	run, err := d.store.GetRun(ctx, "quota")
	must(t, err)
	if run.Status != state.RunFailed || !strings.Contains(run.Detail, "VcpuLimitExceeded") {
		t.Fatalf("run is %s (%s), want failed naming the quota", run.Status, run.Detail)
	}
}

func TestASpotProvisionBeyondTheSpotQuotaFallsBackToOnDemand(t *testing.T) {
	t.Parallel()
	d := deploy(t, func(p *state.PoolConfig) { p.UsageClass, p.OnDemandFallback = "spot", true })
	model := d.withCapacity()
	model.SetQuota(ec2capacity.Spot, "Standard", 2) // one spot c7i.large or m7i.large
	var out provisionOut
	d.call("provision", map[string]any{"runId": "fallback", "pool": "linux", "instanceCount": 2}, &out)
	classes := map[string]int{}
	for _, inst := range out.Instances {
		classes[inst.UsageClass]++
	}
	if out.Status != "ready" || classes["spot"] != 1 || classes["on-demand"] != 1 {
		t.Fatalf("provision = %+v (classes %v), want one spot and one on-demand fallback", out, classes)
	}
}

// Preflight reads the account's vCPU quota (Service Quotas, answered by the
// capacity model) and warns about a pool whose maximum cannot fit, without
// failing: 20 instances of 2 vCPUs need 40 of an 8-vCPU quota.
func TestPreflightWarnsWhenAPoolsMaximumPassesTheVCPUQuota(t *testing.T) {
	t.Parallel()
	d := deploy(t, nil)
	model := d.withCapacity()
	check := func() provision.Check {
		t.Helper()
		var out provisionOut
		d.call("provision", []byte(`{"preflight": true}`), &out)
		for _, c := range out.Checks {
			if c.Check == "quota" && c.Pool == "linux" {
				return c
			}
		}
		t.Fatalf("preflight answered no quota check: %+v", out)
		return provision.Check{}
	}
	if c := check(); !c.OK || !c.Warning || !strings.Contains(c.Detail, "not checked") {
		t.Fatalf("with no quota to read: %+v, want a warning that it was not checked", c)
	}
	model.SetQuota(ec2capacity.OnDemand, "Standard", 8)
	c := check()
	for _, want := range []string{"L-1216C47A", "of 8 vCPUs", "= 40 vCPUs passes", "VcpuLimitExceeded"} {
		if !c.OK || !c.Warning || !strings.Contains(c.Detail, want) {
			t.Errorf("quota check %+v: want an ok warning saying %q", c, want)
		}
	}
	model.SetQuota(ec2capacity.OnDemand, "Standard", 64)
	if c := check(); !c.OK || c.Warning || !strings.Contains(c.Detail, "within") {
		t.Fatalf("quota check with room: %+v, want ok without a warning", c)
	}
}
