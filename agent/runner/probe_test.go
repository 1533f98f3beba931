package runner_test

import (
	"context"
	"net"
	"os"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/runner"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/instancehost"
)

// TestReachesTriesAsTheRunnerUserThroughTheRealFirewall checks the probe
// against the kernel's firewall: the user gets through to a listener until
// a rule like user data's rejects its traffic there, while root still
// gets through.
func TestReachesTriesAsTheRunnerUserThroughTheRealFirewall(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test tries as another user and adds a firewall rule: run it as root (CI does)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ctx := context.Background()
	r := &runner.Runner{User: "nobody"}
	if reached, tried, err := r.Reaches(ctx, l.Addr().String()); err != nil || !tried || !reached {
		t.Fatalf("before the rule: reached %v, tried %v, %v; want reached", reached, tried, err)
	}
	unblock, err := instancehost.BlockIMDS("nobody", "http://"+l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer unblock()
	if reached, tried, err := r.Reaches(ctx, l.Addr().String()); err != nil || !tried || reached {
		t.Fatalf("with the rule: reached %v, tried %v, %v; want not reached", reached, tried, err)
	}
	if c, err := net.Dial("tcp", l.Addr().String()); err != nil {
		t.Fatalf("the rule stops root too: %v", err)
	} else {
		c.Close()
	}
	if _, tried, err := (&runner.Runner{}).Reaches(ctx, l.Addr().String()); tried || err != nil {
		t.Fatalf("with no runner user: tried %v, %v; want no try", tried, err)
	}
}
