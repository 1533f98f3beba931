package provider

import (
	"context"
	"encoding/json"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
)

// The plan-time checks of the schedule's name, function ARN and payload
// (the schedule expression's are in schedule_expression.go).

var (
	scheduleNameRE = regexp.MustCompile(`^[0-9a-zA-Z_.-]{1,64}$`)
	// A function ARN, optionally qualified by a version or an alias.
	scheduleFunctionARNRE = regexp.MustCompile(`^arn:aws[a-z-]*:lambda:[a-z]{2}(-[a-z]+)+-\d+:\d{12}:function:[A-Za-z0-9_-]{1,64}(:(\$LATEST|[A-Za-z0-9_-]{1,128}))?$`)
)

// schedulePayloadValidator checks the event the function receives.
type schedulePayloadValidator struct{}

func (schedulePayloadValidator) Description(context.Context) string { return "must be a JSON object" }

func (v schedulePayloadValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (schedulePayloadValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(req.ConfigValue.ValueString()), &obj); err != nil || obj == nil {
		msg := "the payload must be a JSON object"
		if err != nil {
			msg += " (" + err.Error() + ")"
		}
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid payload", msg+`; for example jsonencode({ mode = "refresh" }) or "{}"`)
	}
}
