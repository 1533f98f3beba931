package fleet

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fielderr"
)

// invalid is a request the fleet refused before calling EC2: a
// *fielderr.Error of source fielderr.Fleet, its field as written in Go
// (e.g. "Count", "SubnetIDs[1]", `Tags["team"]`).
func invalid(field, format string, args ...any) error {
	return fielderr.New(fielderr.Fleet, field, format, args...)
}

// EC2's tag limits per resource.
const (
	maxTags        = 50
	maxTagKeyLen   = 128
	maxTagValueLen = 256
)

// launchTagKeys are set from the request's fields; Tags may not carry them.
var launchTagKeys = []string{TagEnvironment, TagPool, TagOwner, TagAssignment}

// Validate reports the first invalid field of the request.
func (r LaunchRequest) Validate() error {
	switch {
	case r.LaunchTemplateID == "" && r.LaunchTemplateName == "":
		return invalid("LaunchTemplateID", "set the launch template's id or its name")
	case r.LaunchTemplateID != "" && r.LaunchTemplateName != "":
		return invalid("LaunchTemplateName", "set the launch template's id or its name, not both")
	case r.LaunchTemplateVersion == "":
		return invalid("LaunchTemplateVersion", `required: a version number, "$Latest" or "$Default"`)
	case r.Count < 1:
		return invalid("Count", "must be at least 1, got %d", r.Count)
	case r.UsageClass != Spot && r.UsageClass != OnDemand:
		return invalid("UsageClass", "%q is neither %q nor %q", r.UsageClass, Spot, OnDemand)
	case r.Pool == "":
		return invalid("Pool", "required (tag %s)", TagPool)
	case r.Owner == "":
		return invalid("Owner", "required (tag %s)", TagOwner)
	case r.Assignment == "":
		return invalid("Assignment", "required (tag %s)", TagAssignment)
	}
	if err := distinctValues("InstanceTypes", r.InstanceTypes); err != nil {
		return err
	}
	if err := distinctValues("SubnetIDs", r.SubnetIDs); err != nil {
		return err
	}
	return checkExtraTags(r.Tags)
}

// distinctValues wants at least one value, none empty, none twice: a repeated
// type or subnet would only repeat overrides.
func distinctValues(field string, values []string) error {
	if len(values) == 0 {
		return invalid(field, "at least one is required")
	}
	seen := make(map[string]bool, len(values))
	for i, v := range values {
		switch {
		case strings.TrimSpace(v) == "":
			return invalid(fmt.Sprintf("%s[%d]", field, i), "empty")
		case seen[v]:
			return invalid(fmt.Sprintf("%s[%d]", field, i), "%q is listed twice", v)
		}
		seen[v] = true
	}
	return nil
}

func checkExtraTags(tags map[string]string) error {
	if n := len(tags) + len(launchTagKeys); n > maxTags {
		return invalid("Tags", "%d tags with ours, EC2 allows %d per resource", n, maxTags)
	}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same bad tag is reported every time
	for _, k := range keys {
		v := tags[k]
		field := fmt.Sprintf("Tags[%q]", k)
		switch {
		case strings.TrimSpace(k) == "":
			return invalid(field, "empty key")
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			return invalid(field, "the aws: prefix is reserved by AWS")
		case utf8.RuneCountInString(k) > maxTagKeyLen:
			return invalid(field, "key longer than %d characters", maxTagKeyLen)
		case utf8.RuneCountInString(v) > maxTagValueLen:
			return invalid(field, "value longer than %d characters", maxTagValueLen)
		}
		for _, ours := range launchTagKeys {
			if k == ours {
				return invalid(field, "set by the fleet from the request; use the matching field")
			}
		}
	}
	return nil
}
