package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
)

// The tags every object the provider makes accepts, checked at plan time
// instead of failing mid-apply or, for the pool's instances, at launch. One
// rule for all: tags reach IAM roles, whose Tag type (IAM API reference) is
// the strictest of the services we tag — keys of 1-128 and values of up to
// 256 Unicode letters, digits, spaces and _ . : / = + - @, no key beginning
// with aws: (reserved for AWS by every service) — and an object holds at
// most 50 (EC2, IAM), of which ghrunner adds up to four of its own (ghr:).
// Instance metadata tags are off in the launch template (nothing reads
// them), so EC2's narrower rule for keys shown there does not apply.
var (
	tagKeyRE   = regexp.MustCompile(`^[\p{L}\p{Z}\p{N}_.:/=+\-@]{1,128}$`)
	tagValueRE = regexp.MustCompile(`^[\p{L}\p{Z}\p{N}_.:/=+\-@]{0,256}$`)
)

const maxOwnTags = 46

// tagValidators are the plan-time checks of a tags map.
func tagValidators() []validator.Map {
	return []validator.Map{
		mapvalidator.SizeAtMost(maxOwnTags),
		mapvalidator.KeysAre(
			stringvalidator.RegexMatches(tagKeyRE, "must be 1-128 letters, digits, spaces or _ . : / = + - @ (IAM's tag rule: these tags reach roles)"),
			notReservedTagKey{}),
		mapvalidator.ValueStringsAre(stringvalidator.RegexMatches(tagValueRE, "must be at most 256 letters, digits, spaces or _ . : / = + - @ (IAM's tag rule: these tags reach roles)")),
	}
}

// notReservedTagKey refuses keys beginning with aws: in any case.
type notReservedTagKey struct{}

func (notReservedTagKey) Description(context.Context) string {
	return "must not begin with aws: (reserved for AWS)"
}
func (v notReservedTagKey) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v notReservedTagKey) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if strings.HasPrefix(strings.ToLower(req.ConfigValue.ValueString()), "aws:") {
		resp.Diagnostics.AddAttributeError(req.Path, "Reserved tag key",
			fmt.Sprintf("tag key %q %s", req.ConfigValue.ValueString(), v.Description(ctx)))
	}
}
