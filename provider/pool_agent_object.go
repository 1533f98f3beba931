package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

// The agent binary in S3: unless agent_path names one preinstalled in the
// AMI, the provider uploads the agent it embeds to a private bucket of the
// pool, and the instances download it with their role and check its
// SHA-256 (agentPolicy allows s3:GetObject under agent/ only).

// agentObject is where the instances download the agent from, and its
// SHA-256; both are empty with agent_path.
type agentObject struct{ url, sha256 string }

// ensureAgent uploads the agent the provider embeds for arch, making the
// pool's bucket on first use, and records the bucket and the agent's
// SHA-256 in plan.
func (r *poolResource) ensureAgent(ctx context.Context, plan, prior *poolModel, arch string, tags map[string]string) (agentObject, diag.Diagnostics) {
	var diags diag.Diagnostics
	var agent agentObject
	plan.AgentBucket = types.StringValue("")
	if prior != nil {
		plan.AgentBucket = prior.AgentBucket
	}
	if plan.AgentPath.IsNull() {
		a, err := agentAsset(arch)
		if err != nil {
			diags.AddAttributeError(path.Root("agent_path"), "The provider has no agent to upload", err.Error())
			return agent, diags
		}
		bucket := plan.AgentBucket.ValueString()
		if bucket == "" {
			if bucket, err = r.createBucket(ctx, tags); err != nil {
				diags.AddError("Creating the agent bucket failed", err.Error())
				return agent, diags
			}
			plan.AgentBucket = types.StringValue(bucket)
		}
		key := agentKey(a.sha256Hex)
		if _, err := admin.S3(r.c.aws).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(string(a.data)),
			ServerSideEncryption: s3types.ServerSideEncryptionAes256}); err != nil {
			diags.AddError("Uploading the agent failed", err.Error())
			return agent, diags
		}
		agent = agentObject{url: r.objectURL(*plan, bucket, key), sha256: a.sha256Hex}
	}
	plan.AgentSHA256 = types.StringValue(agent.sha256)
	return agent, diags
}

// createBucket makes the pool's private, tagged agent bucket.
func (r *poolResource) createBucket(ctx context.Context, tags map[string]string) (string, error) {
	suffix := make([]byte, 6)
	if _, err := rand.Read(suffix); err != nil {
		return "", err
	}
	bucket := "ghr-" + r.c.environment + "-agent-" + hex.EncodeToString(suffix)
	in := &s3.CreateBucketInput{Bucket: aws.String(bucket)}
	if region := r.c.aws.AWS.Region; region != "us-east-1" {
		in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(region)}
	}
	client := admin.S3(r.c.aws)
	if _, err := client.CreateBucket(ctx, in); err != nil {
		return "", err
	}
	if _, err := client.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{Bucket: aws.String(bucket), PublicAccessBlockConfiguration: &s3types.PublicAccessBlockConfiguration{
		BlockPublicAcls: aws.Bool(true), BlockPublicPolicy: aws.Bool(true), IgnorePublicAcls: aws.Bool(true), RestrictPublicBuckets: aws.Bool(true)}}); err != nil {
		return bucket, err
	}
	_, err := client.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: aws.String(bucket), Tagging: &s3types.Tagging{TagSet: s3Tags(tags)}})
	return bucket, err
}

// objectURL is the URL the instance downloads the agent from: under the
// pool's S3 endpoint for its agents (an interface VPC endpoint, virtual
// hosted: bucket.vpce-….s3.<region>.vpce.amazonaws.com), else the regional
// virtual-hosted URL, or path style under an overridden S3 endpoint.
func (r *poolResource) objectURL(m poolModel, bucket, key string) string {
	if v, ok := m.AgentEndpoints.Elements()["s3"].(types.String); ok && v.ValueString() != "" {
		if u, err := url.Parse(v.ValueString()); err == nil && u.Scheme == "https" && !loopbackHost(u.Hostname()) {
			u.Host, u.Path = bucket+"."+u.Host, "/"+key
			return u.String()
		}
		if u, err := url.JoinPath(v.ValueString(), bucket, key); err == nil {
			return u
		}
	}
	if ep := r.c.aws.Endpoint("s3"); ep != nil {
		u, err := url.JoinPath(*ep, bucket, key)
		if err == nil {
			return u
		}
	}
	region := r.c.aws.AWS.Region
	return fmt.Sprintf("https://%s.s3.%s.%s/%s", bucket, region, dnsSuffix(partitionOf(region)), key)
}

// bucketOf finds the bucket in an S3 object URL, virtual-hosted or path style.
func bucketOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return ""
	}
	if host, _, ok := strings.Cut(u.Hostname(), ".s3."); ok {
		return host
	}
	first, _, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	return first
}

// deleteBucket empties and deletes the agent bucket; one already gone is fine.
func (r *poolResource) deleteBucket(ctx context.Context, bucket string) error {
	client := admin.S3(r.c.aws)
	pages := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if awserr.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, o := range page.Contents {
			if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: o.Key}); err != nil {
				return err
			}
		}
	}
	_, err := client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	return awserr.IgnoreNotFound(err)
}

func loopbackHost(h string) bool {
	ip := net.ParseIP(h)
	return h == "localhost" || ip != nil && ip.IsLoopback()
}
