package provider

import (
	"context"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
)

// Tags: what the provider puts on the objects it creates, how it compares
// them with what an object carries, and each service's tag shape.

// The tags that say whose an object is. ghr:environment and ghr:pool are the
// fleet's (instances carry them too); ghr:schedule marks a schedule's role.
const (
	tagEnvironment = fleet.TagEnvironment
	tagPool        = fleet.TagPool
	tagSchedule    = "ghr:schedule"
	// tagTable names the state table of the deployment a function's or a
	// pool's role serves.
	tagTable = "ghr:table"
)

// ownerTagKeys are the tags that name the one resource and deployment a role
// serves (see ensureRole). A function's role has only ghr:table: its name
// says the rest.
var ownerTagKeys = []string{tagPool, tagSchedule, tagTable, tagInvoker}

// tags returns the tags every object of the deployment carries, merged with
// the resource's own (which win).
func (c *clients) tags(own map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range c.defaultTags {
		out[k] = v
	}
	for k, v := range own {
		out[k] = v
	}
	// Last: a resource's tags cannot move it to another environment.
	out[tagEnvironment] = c.environment
	return out
}

// resourceTags is c.tags of a resource's tags attribute.
func (c *clients) resourceTags(ctx context.Context, own types.Map) (map[string]string, diag.Diagnostics) {
	m := map[string]string{}
	diags := own.ElementsAs(ctx, &m, false)
	return c.tags(m), diags
}

// ownTags picks, out of the tags an object carries, the ones its resource
// declares itself (shared by ghrunner_table and ghrunner_queue). Left out are
// AWS's own aws: tags and the tags the provider adds (ghr:environment and the
// default_tags) while they carry the provider's value: a provider tag with
// another value was set or changed by someone else and so shows as drift. A key
// the prior tags list with the value found stays, so that tags repeating a
// default do not plan a change forever. With nothing left and a null prior the
// result stays null, so an unset attribute does not turn into an empty map.
func ownTags(ctx context.Context, c *clients, remote map[string]string, prior types.Map) (types.Map, diag.Diagnostics) {
	var diags diag.Diagnostics
	had := map[string]string{}
	if !prior.IsNull() && !prior.IsUnknown() {
		diags.Append(prior.ElementsAs(ctx, &had, false)...)
	}
	provided := c.tags(nil)
	own := map[string]string{}
	for k, v := range remote {
		if strings.HasPrefix(k, "aws:") {
			continue
		}
		if pv, ok := provided[k]; ok && pv == v {
			if hv, declared := had[k]; !declared || hv != v {
				continue
			}
		}
		own[k] = v
	}
	if len(own) == 0 && (prior.IsNull() || prior.IsUnknown()) {
		return types.MapNull(types.StringType), diags
	}
	m, d := types.MapValueFrom(ctx, types.StringType, own)
	diags.Append(d...)
	return m, diags
}

// tagChanges compares the tags an object should carry with those it carries:
// set holds the missing and changed ones, remove (sorted) the keys no longer
// wanted. aws: tags are AWS's and are never removed.
func tagChanges(want, have map[string]string) (set map[string]string, remove []string) {
	set = map[string]string{}
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			set[k] = v
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok && !strings.HasPrefix(k, "aws:") {
			remove = append(remove, k)
		}
	}
	sort.Strings(remove)
	return set, remove
}

// droppedTags lists (sorted) the keys of before that after no longer has:
// the tags an update takes off an object it tagged before.
func droppedTags(before, after map[string]string) []string {
	var drop []string
	for k := range before {
		if _, ok := after[k]; !ok {
			drop = append(drop, k)
		}
	}
	sort.Strings(drop)
	return drop
}

// hasTag reports whether an IAM object carries key with value.
func hasTag(tags []iamtypes.Tag, key, value string) bool {
	v, ok := tagValue(tags, key)
	return ok && v == value
}

// tagValue is the value of key on an IAM object, and whether it has one.
func tagValue(tags []iamtypes.Tag, key string) (string, bool) {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value), true
		}
	}
	return "", false
}

// tagList is tags in one service's tag type; the functions below name the
// services.
func tagList[T any](tags map[string]string, tag func(key, value *string) T) []T {
	out := make([]T, 0, len(tags))
	for k, v := range tags {
		out = append(out, tag(aws.String(k), aws.String(v)))
	}
	return out
}

func iamTags(tags map[string]string) []iamtypes.Tag {
	return tagList(tags, func(k, v *string) iamtypes.Tag { return iamtypes.Tag{Key: k, Value: v} })
}

func ec2Tags(tags map[string]string) []ec2types.Tag {
	return tagList(tags, func(k, v *string) ec2types.Tag { return ec2types.Tag{Key: k, Value: v} })
}

func s3Tags(tags map[string]string) []s3types.Tag {
	return tagList(tags, func(k, v *string) s3types.Tag { return s3types.Tag{Key: k, Value: v} })
}

func dynamoDBTags(tags map[string]string) []ddbtypes.Tag {
	return tagList(tags, func(k, v *string) ddbtypes.Tag { return ddbtypes.Tag{Key: k, Value: v} })
}
