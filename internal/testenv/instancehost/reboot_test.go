package instancehost_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/instancehost"
)

// bootLogger stands in for the agent: at each start it notes the boot its
// configuration names and leaves a file in the run folder, then waits.
const bootLogger = `#!/bin/sh
dir=$(dirname "$(dirname "$2")")
echo "boot $(cat "$dir/boot_id")" >>"$dir/boots.log"
mkdir -p "$dir/run" && touch "$dir/run/in-memory"
exec sleep 600
`

// An instance stopped and started again is a shutdown and a boot of the
// same disk: the agent is ended at the stop and the run folder (memory)
// cleared, its other folders kept; at the start the agent runs again under
// a new boot id, once. Terminated, the agent is gone. Checked: with the
// host treating a stopped instance as gone (as before), the agent and its
// folder were dropped at the stop and this failed waiting for "the agent
// ended at the stop".
func TestAStoppedAndStartedInstanceRebootsItsAgentOnTheSameDisk(t *testing.T) {
	moto, err := awstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(moto.Stop)
	ec := moto.Config(t).EC2()
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(bin, []byte(bootLogger), 0o755); err != nil {
		t.Fatal(err)
	}
	host, err := instancehost.Start(ctx, instancehost.Options{EC2: ec, Region: awstest.Region, Environment: "reboot", AgentBinary: bin,
		Root: t.TempDir(), Poll: 50 * time.Millisecond, Config: func(string, map[string]string) config.Config { return config.Defaults() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(host.Stop)
	run, err := ec.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(moto.Network(t).AMI), InstanceType: types.InstanceTypeC7iLarge,
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance,
			Tags: []types.Tag{{Key: aws.String("ghr:environment"), Value: aws.String("reboot")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(run.Instances[0].InstanceId)
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("not within 10 s: %s", what)
			}
		}
	}
	boots := func() []string {
		a := host.Agent(id)
		if a == nil {
			return nil
		}
		raw, _ := os.ReadFile(filepath.Join(a.Dir, "boots.log"))
		return strings.Fields(strings.ReplaceAll(string(raw), "boot ", ""))
	}
	eventually("the agent of the launched instance started", func() bool { a := host.Agent(id); return a != nil && a.PID() != 0 && len(boots()) == 1 })
	dir := host.Agent(id).Dir

	if _, err := ec.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	eventually("the agent ended at the stop", func() bool { a := host.Agent(id); return a != nil && a.PID() == 0 })
	eventually("the run folder cleared at the stop", func() bool { _, err := os.Stat(filepath.Join(dir, "run", "in-memory")); return os.IsNotExist(err) })
	time.Sleep(300 * time.Millisecond) // polls while stopped: nothing starts it
	if a := host.Agent(id); a == nil || a.PID() != 0 || a.Dir != dir {
		t.Fatalf("while stopped: agent %+v, want its folder %s kept and no process", a, dir)
	}

	if _, err := ec.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	eventually("the agent started again at the start", func() bool { a := host.Agent(id); return a != nil && a.PID() != 0 && len(boots()) == 2 })
	a := host.Agent(id)
	if b := boots(); b[0] == b[1] || a.Boots != 2 || a.Starts != 2 || a.Dir != dir {
		t.Fatalf("after the start: boots %v (want two ids), Boots %d, Starts %d, folder %s (want %s)", b, a.Boots, a.Starts, a.Dir, dir)
	}

	if _, err := ec.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	eventually("the agent gone with its terminated instance", func() bool { return host.Agent(id) == nil })
}
