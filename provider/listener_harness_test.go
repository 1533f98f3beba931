package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

// The listener tests' harness: a registry for the pushes, a recorder of
// the service requests, the stand-in bundle, the configuration and the
// destroy check.

// testRegistry is a registry (go-containerregistry's) standing in for the
// one ECR serves at a repository's repositoryUri, which moto does not: the
// provider pushes to it through endpoints.ecr_registry. It counts the
// manifests pushed.
type testRegistry struct {
	host      string
	net       awstest.Network
	manifests atomic.Int64
	// ecs is a recorder in front of moto's ECS, which drops a service's
	// deploymentConfiguration: the test reads what the provider sent.
	ecs      string
	mu       sync.Mutex
	services []map[string]any // CreateService and UpdateService requests
}

func startRegistry(t *testing.T) *testRegistry {
	reg := &testRegistry{net: env.Network(t)}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
			reg.manifests.Add(1)
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	reg.host = strings.TrimPrefix(srv.URL, "http://")
	target, _ := url.Parse(env.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if op := r.Header.Get("X-Amz-Target"); strings.HasSuffix(op, ".CreateService") || strings.HasSuffix(op, ".UpdateService") {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var in map[string]any
			if json.Unmarshal(body, &in) == nil {
				reg.mu.Lock()
				reg.services = append(reg.services, in)
				reg.mu.Unlock()
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(rec.Close)
	reg.ecs = rec.URL
	return reg
}

// lastDeployment is the deploymentConfiguration of the last CreateService
// or UpdateService the provider sent.
func (reg *testRegistry) lastDeployment() string {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if len(reg.services) == 0 {
		return "none"
	}
	b, _ := json.Marshal(reg.services[len(reg.services)-1]["deploymentConfiguration"])
	return string(b)
}

// standIn is the stand-in bootstrap the bundle holds now (for arch, with
// " <arch>" after it).
var standIn string

// withListenerBundle swaps the embedded bundle for zips of a small
// stand-in bootstrap: the image the provider builds is of what it embeds.
func withListenerBundle(t *testing.T, bootstrap string) {
	standIn = bootstrap
	saved := assets
	t.Cleanup(func() { assets = saved })
	fs := fstest.MapFS{}
	for _, arch := range bundle.Architectures {
		z, err := bundle.Zip("bootstrap", []byte(bootstrap+" "+arch))
		if err != nil {
			t.Fatal(err)
		}
		fs[bundle.FunctionZip(arch)] = &fstest.MapFile{Data: z}
	}
	assets = fs
}

func listenerConfig(reg *testRegistry, table, extra string) string {
	provider := strings.Replace(providerConfig(), "  endpoints {\n", fmt.Sprintf("  endpoints {\n    ecr_registry = %q\n", reg.host), 1)
	provider = strings.Replace(provider, fmt.Sprintf("ecs       = %q", env.URL), fmt.Sprintf("ecs       = %q", reg.ecs), 1)
	return provider + fmt.Sprintf(`
resource "ghrunner_table" "state" {
  name = %q
}
resource "ghrunner_queue" "linux" {
  name = %q
}
resource "ghrunner_listener" "l" {
  table              = ghrunner_table.state.name
  github_parameter   = "/ghrunner/acc/github"
  queue_arns         = [ghrunner_queue.linux.arn]
  subnet_ids         = [%q]
  security_group_ids = [%q]
%s
}
`, table, table+"-q", reg.net.Subnet, reg.net.SecurityGroup, extra)
}

// listenerGone: the service, the task definitions, the roles, the log
// group, the repository and the cluster the provider made.
func listenerGone(ctx context.Context, c awsconf.Config, id string, attrs map[string]string) error {
	errs := []error{roleGone(ctx, c, attrs["task_role_name"]), roleGone(ctx, c, attrs["execution_role_name"])}
	_, err := findRepository(ctx, admin.ECR(c), "ghr-"+id+"-listener")
	errs = append(errs, goneOrMissing("repository", err))
	if _, err := findService(ctx, admin.ECS(c), attrs["cluster"], "ghr-"+id+"-listener"); !isGone(err) {
		errs = append(errs, fmt.Errorf("service left behind (%v)", err))
	}
	defs, err := admin.ECS(c).ListTaskDefinitions(ctx, &ecs.ListTaskDefinitionsInput{FamilyPrefix: aws.String("ghr-" + id + "-listener"), Status: ecstypes.TaskDefinitionStatusActive})
	if err != nil || len(defs.TaskDefinitionArns) > 0 {
		errs = append(errs, fmt.Errorf("task definitions left: %v %v", defs, err))
	}
	groups, err := admin.Logs(c).DescribeLogGroups(ctx, &cloudwatchlogs.DescribeLogGroupsInput{LogGroupNamePrefix: aws.String("/ghrunner/" + id + "/listener")})
	if err != nil || len(groups.LogGroups) > 0 {
		errs = append(errs, fmt.Errorf("log group left (%v)", err))
	}
	clusters, err := admin.ECS(c).DescribeClusters(ctx, &ecs.DescribeClustersInput{Clusters: []string{"ghr-" + id}})
	if err != nil {
		errs = append(errs, err)
	} else {
		for _, cl := range clusters.Clusters {
			if aws.ToString(cl.Status) == "ACTIVE" {
				errs = append(errs, fmt.Errorf("cluster %s left", aws.ToString(cl.ClusterArn)))
			}
		}
	}
	return errors.Join(errs...)
}

func goneOrMissing(what string, err error) error {
	if isGone(err) {
		return nil
	}
	return fmt.Errorf("%s left behind (%v)", what, err)
}

func init() { objectsGone["ghrunner_listener"] = listenerGone }
