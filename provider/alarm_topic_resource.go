package provider

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

var (
	_ resource.Resource                = &alarmTopicResource{}
	_ resource.ResourceWithConfigure   = &alarmTopicResource{}
	_ resource.ResourceWithImportState = &alarmTopicResource{}
)

func newAlarmTopicResource() resource.Resource { return &alarmTopicResource{} }

// alarmTopicResource is ghrunner_alarm_topic: the SNS topic ghrunner's alarms
// and failed scheduled runs notify (ghrunner_monitoring.alarm_topic_arn,
// ghrunner_function.on_failure_topic_arn), with e-mail subscriptions, for a
// team that has no topic of its own. Its default access policy lets the
// account's CloudWatch alarms and the functions' roles publish.
type alarmTopicResource struct{ configured }

type alarmTopicModel struct {
	ID     types.String `tfsdk:"id"`
	Name   types.String `tfsdk:"name"`
	Emails types.Set    `tfsdk:"email_addresses"`
	ARN    types.String `tfsdk:"arn"`
}

var (
	topicNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)
	emailRE     = regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[^@\s]+$`)
)

func (r *alarmTopicResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_alarm_topic"
}

func (r *alarmTopicResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "An SNS topic for ghrunner's alarms and failed scheduled runs, with e-mail subscriptions. Use its arn as ghrunner_monitoring.alarm_topic_arn (and ghrunner_function.on_failure_topic_arn); bring your own topic instead when you have one.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The topic ARN.", PlanModifiers: keep},
			"name": schema.StringAttribute{Required: true, Description: "Topic name.",
				Validators:    []validator.String{stringvalidator.RegexMatches(topicNameRE, "must be 1-256 characters of A-Z a-z 0-9 _ - (a standard topic)")},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"email_addresses": schema.SetAttribute{Optional: true, ElementType: types.StringType,
				Description: "Addresses subscribed to the topic. SNS mails each a confirmation link; nothing is delivered to an address until it is confirmed. An address removed here is unsubscribed once confirmed (SNS cannot remove a pending subscription: it lapses after three days).",
				Validators:  []validator.Set{setvalidator.ValueStringsAre(stringvalidator.RegexMatches(emailRE, "must be an e-mail address"))}},
			"arn": schema.StringAttribute{Computed: true, Description: "Topic ARN.", PlanModifiers: keep},
		},
	}
}

func (r *alarmTopicResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan alarmTopicModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	tags, diags := r.c.resourceTags(ctx, types.MapNull(types.StringType))
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	var snsTags []snstypes.Tag
	for k, v := range tags {
		snsTags = append(snsTags, snstypes.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	out, err := admin.SNS(r.c.aws).CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(plan.Name.ValueString()), Tags: snsTags})
	if err != nil {
		resp.Diagnostics.AddError("Creating the alarm topic failed", err.Error())
		return
	}
	arn := aws.ToString(out.TopicArn)
	plan.ID, plan.ARN = types.StringValue(arn), types.StringValue(arn)
	// The topic exists: save it before subscribing, so a failed
	// subscription leaves nothing Terraform does not know.
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	resp.Diagnostics.Append(r.subscribe(ctx, arn, plan, nil)...)
}

func (r *alarmTopicResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var st alarmTopicModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	arn := st.ID.ValueString()
	_, err := admin.SNS(r.c.aws).GetTopicAttributes(ctx, &sns.GetTopicAttributesInput{TopicArn: aws.String(arn)})
	if awserr.IsNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Reading the alarm topic failed", err.Error())
		return
	}
	subs, err := r.emails(ctx, arn)
	if err != nil {
		resp.Diagnostics.AddError("Reading the alarm topic's subscriptions failed", err.Error())
		return
	}
	st.ARN, st.Name = types.StringValue(arn), types.StringValue(arn[strings.LastIndex(arn, ":")+1:])
	if len(subs) > 0 || !st.Emails.IsNull() {
		st.Emails, _ = types.SetValueFrom(ctx, types.StringType, slices.Sorted(maps.Keys(subs)))
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

func (r *alarmTopicResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, st alarmTopicModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.ID, plan.ARN = st.ID, st.ARN
	resp.Diagnostics.Append(r.subscribe(ctx, st.ID.ValueString(), plan, &st)...)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

func (r *alarmTopicResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var st alarmTopicModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// Deleting a topic deletes its subscriptions.
	_, err := admin.SNS(r.c.aws).DeleteTopic(ctx, &sns.DeleteTopicInput{TopicArn: aws.String(st.ID.ValueString())})
	if awserr.IgnoreNotFound(err) != nil {
		resp.Diagnostics.AddError("Deleting the alarm topic failed", err.Error())
	}
}

// ImportState takes the topic ARN.
func (r *alarmTopicResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if !snsTopicARNRE.MatchString(req.ID) {
		resp.Diagnostics.AddError("Importing the alarm topic failed", fmt.Sprintf("%q is not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}

// subscribe subscribes the plan's addresses the topic lacks and
// unsubscribes confirmed ones the plan dropped (prior: the state before).
func (r *alarmTopicResource) subscribe(ctx context.Context, arn string, plan alarmTopicModel, prior *alarmTopicModel) diag.Diagnostics {
	var diags diag.Diagnostics
	var want []string
	diags.Append(plan.Emails.ElementsAs(ctx, &want, false)...)
	if diags.HasError() {
		return diags
	}
	have, err := r.emails(ctx, arn)
	if err != nil {
		diags.AddError("Reading the alarm topic's subscriptions failed", err.Error())
		return diags
	}
	client := admin.SNS(r.c.aws)
	for _, e := range want {
		if _, ok := have[e]; ok {
			continue
		}
		if _, err := client.Subscribe(ctx, &sns.SubscribeInput{TopicArn: aws.String(arn), Protocol: aws.String("email"), Endpoint: aws.String(e)}); err != nil {
			diags.AddAttributeError(path.Root("email_addresses"), "Subscribing "+e+" failed", err.Error())
		}
	}
	for e, sub := range have {
		if slices.Contains(want, e) {
			continue
		}
		if !strings.HasPrefix(sub, "arn:") { // PendingConfirmation: SNS cannot remove it
			diags.AddAttributeWarning(path.Root("email_addresses"), "Subscription of "+e+" still pending",
				"SNS cannot remove a subscription that was never confirmed; it lapses after three days, and nothing is delivered to it meanwhile.")
			continue
		}
		if _, err := client.Unsubscribe(ctx, &sns.UnsubscribeInput{SubscriptionArn: aws.String(sub)}); awserr.IgnoreNotFound(err) != nil {
			diags.AddAttributeError(path.Root("email_addresses"), "Unsubscribing "+e+" failed", err.Error())
		}
	}
	return diags
}

// emails maps each e-mail endpoint subscribed to the topic to its
// subscription ARN ("PendingConfirmation" until confirmed).
func (r *alarmTopicResource) emails(ctx context.Context, arn string) (map[string]string, error) {
	out := map[string]string{}
	p := sns.NewListSubscriptionsByTopicPaginator(admin.SNS(r.c.aws), &sns.ListSubscriptionsByTopicInput{TopicArn: aws.String(arn)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, s := range page.Subscriptions {
			if aws.ToString(s.Protocol) == "email" {
				out[aws.ToString(s.Endpoint)] = aws.ToString(s.SubscriptionArn)
			}
		}
	}
	return out, nil
}
