package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

var (
	_ resource.Resource                = &queueResource{}
	_ resource.ResourceWithConfigure   = &queueResource{}
	_ resource.ResourceWithImportState = &queueResource{}
)

func newQueueResource() resource.Resource { return &queueResource{} }

// queueResource is ghrunner_queue: the SQS queue of one pool, where
// released, clean instances wait for the next provision (docs/design.md).
type queueResource struct{ configured }

type queueModel struct {
	ID                types.String `tfsdk:"id"`
	Name              types.String `tfsdk:"name"`
	VisibilityTimeout types.Int64  `tfsdk:"visibility_timeout_seconds"`
	MessageRetention  types.Int64  `tfsdk:"message_retention_seconds"`
	DeadLetterARN     types.String `tfsdk:"dead_letter_queue_arn"`
	MaxReceiveCount   types.Int64  `tfsdk:"max_receive_count"`
	Tags              types.Map    `tfsdk:"tags"`
	URL               types.String `tfsdk:"url"`
	ARN               types.String `tfsdk:"arn"`
}

var queueNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

// queueARNRE matches the ARN of a standard queue (a standard queue's dead
// letter queue must be standard too).
var queueARNRE = regexp.MustCompile(`^arn:aws[a-z-]*:sqs:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,80}$`)

// defaultMaxReceiveCount is SQS's ceiling: see max_receive_count.
const defaultMaxReceiveCount = 1000

func (r *queueResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_queue"
}

func (r *queueResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "The SQS queue of a pool: released, clean instances wait in it for the next provision. Encrypted with SQS-managed keys.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The queue URL.", PlanModifiers: keep},
			"name": schema.StringAttribute{Required: true, Description: "Queue name.",
				Validators:    []validator.String{stringvalidator.RegexMatches(queueNameRE, "must be 1-80 characters of A-Z a-z 0-9 _ - (standard queues only)")},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"visibility_timeout_seconds": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(30),
				Description: "How long a received pool message stays hidden while a provision decides (0-43200).",
				Validators:  []validator.Int64{int64validator.Between(0, 43200)}},
			"message_retention_seconds": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(86400),
				Description: "How long a pool message is kept (60-1209600); keep it above the pools' idle TTL.",
				Validators:  []validator.Int64{int64validator.Between(60, 1209600)}},
			"dead_letter_queue_arn": schema.StringAttribute{Optional: true,
				Description: "ARN of a standard SQS queue (typically another ghrunner_queue with a long retention) that takes pool messages received more than max_receive_count times. No redrive policy when unset.",
				Validators:  []validator.String{stringvalidator.RegexMatches(queueARNRE, "must be the ARN of a standard SQS queue (arn:aws:sqs:REGION:ACCOUNT:NAME)")}},
			"max_receive_count": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(defaultMaxReceiveCount),
				Description: "Receives after which a message moves to dead_letter_queue_arn (1-1000; needs dead_letter_queue_arn). " +
					"The default is SQS's maximum on purpose: a provision receives pool messages and puts back the ones whose instance does not match its request, " +
					"so a healthy pool message is received many times over its life; a low count would move live pool messages into the dead letter queue.",
				Validators: []validator.Int64{int64validator.Between(1, 1000), int64validator.AlsoRequires(path.MatchRoot("dead_letter_queue_arn"))}},
			"tags": schema.MapAttribute{Optional: true, ElementType: types.StringType, Validators: tagValidators(),
				Description: "Tags of the queue, merged over ghr:environment and the provider's default_tags (a key given here wins). Read back: a tag added, changed or removed outside Terraform shows in the plan (a provider tag only when changed or overridden)."},
			"url": schema.StringAttribute{Computed: true, Description: "Queue URL.", PlanModifiers: keep},
			"arn": schema.StringAttribute{Computed: true, Description: "Queue ARN.", PlanModifiers: keep},
		},
	}
}

func (r *queueResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan queueModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	tags, diags := r.c.resourceTags(ctx, plan.Tags)
	resp.Diagnostics.Append(diags...)
	var out *sqs.CreateQueueOutput
	// SQS refuses a queue name deleted less than 60 s ago: a pool
	// recreated (destroy then apply, a rename back) waits that out.
	err := retryWhile(ctx, 5*time.Second, 75*time.Second, queueDeletedRecently, func() (err error) {
		out, err = r.c.aws.SQS().CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(plan.Name.ValueString()), Attributes: r.attributes(plan, nil), Tags: tags})
		return err
	})
	if err != nil {
		resp.Diagnostics.AddError("Creating the pool queue failed", err.Error())
		return
	}
	if found, err := r.read(ctx, aws.ToString(out.QueueUrl), &plan); err != nil || !found {
		resp.Diagnostics.AddError("Reading the new pool queue failed", fmt.Sprint(err))
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *queueResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var st queueModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	found, err := r.read(ctx, st.ID.ValueString(), &st)
	if err != nil {
		resp.Diagnostics.AddError("Reading the pool queue failed", err.Error())
		return
	}
	if !found {
		resp.State.RemoveResource(ctx)
		return
	}
	remote, err := r.listTags(ctx, st.ID.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Reading the pool queue's tags failed", err.Error())
		return
	}
	var diags diag.Diagnostics
	st.Tags, diags = ownTags(ctx, r.c, remote, st.Tags)
	resp.Diagnostics.Append(diags...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

func (r *queueResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, st queueModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	url := st.ID.ValueString()
	client := r.c.aws.SQS()
	if _, err := client.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: r.attributes(plan, &st)}); err != nil {
		resp.Diagnostics.AddError("Updating the pool queue failed", err.Error())
		return
	}
	tags, diags := r.c.resourceTags(ctx, plan.Tags)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	have, err := r.listTags(ctx, url)
	if err != nil {
		resp.Diagnostics.AddError("Reading the pool queue's tags failed", err.Error())
		return
	}
	set, remove := tagChanges(tags, have)
	if len(remove) > 0 {
		if _, err := client.UntagQueue(ctx, &sqs.UntagQueueInput{QueueUrl: aws.String(url), TagKeys: remove}); err != nil {
			resp.Diagnostics.AddError("Removing tags from the pool queue failed", err.Error())
			return
		}
	}
	if len(set) > 0 {
		if _, err := client.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(url), Tags: set}); err != nil {
			resp.Diagnostics.AddError("Tagging the pool queue failed", err.Error())
			return
		}
	}
	if _, err := r.read(ctx, url, &plan); err != nil {
		resp.Diagnostics.AddError("Reading the pool queue failed", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *queueResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var st queueModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	_, err := r.c.aws.SQS().DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(st.ID.ValueString())})
	if awserr.IgnoreNotFound(err) != nil {
		resp.Diagnostics.AddError("Deleting the pool queue failed", err.Error())
	}
}

// ImportState takes the queue name (or URL).
func (r *queueResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	url := req.ID
	if !regexp.MustCompile(`^https?://`).MatchString(url) {
		out, err := r.c.aws.SQS().GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(req.ID)})
		if err != nil {
			resp.Diagnostics.AddError("Importing the pool queue failed", "no queue named "+req.ID+": "+err.Error())
			return
		}
		url = aws.ToString(out.QueueUrl)
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), url)...)
}

// read fills m from the queue's attributes; found is false when the queue is
// gone. Tags are left alone: Read lists them, Create and Update keep the tags
// they just wrote.
func (r *queueResource) read(ctx context.Context, url string, m *queueModel) (bool, error) {
	out, err := r.c.aws.SQS().GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if awserr.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	a := out.Attributes
	vis, _ := strconv.ParseInt(a["VisibilityTimeout"], 10, 64)
	ret, _ := strconv.ParseInt(a["MessageRetentionPeriod"], 10, 64)
	arn := a["QueueArn"]
	name := arn[regexp.MustCompile(`[^:]*$`).FindStringIndex(arn)[0]:]
	m.ID, m.URL, m.ARN, m.Name = types.StringValue(url), types.StringValue(url), types.StringValue(arn), types.StringValue(name)
	m.VisibilityTimeout, m.MessageRetention = types.Int64Value(vis), types.Int64Value(ret)
	if policy := a["RedrivePolicy"]; policy != "" {
		var p redrivePolicy
		if err := json.Unmarshal([]byte(policy), &p); err != nil {
			return false, fmt.Errorf("the queue's RedrivePolicy %q is not JSON: %w", policy, err)
		}
		count, err := strconv.ParseInt(strings.Trim(string(p.MaxReceiveCount), `"`), 10, 64)
		if err != nil {
			return false, fmt.Errorf("the queue's RedrivePolicy %q has no numeric maxReceiveCount", policy)
		}
		m.DeadLetterARN, m.MaxReceiveCount = types.StringValue(p.DeadLetterTargetARN), types.Int64Value(count)
	} else {
		// No redrive policy: max_receive_count has nothing to read back and
		// keeps its planned (or prior, or default) value.
		m.DeadLetterARN = types.StringNull()
		if m.MaxReceiveCount.IsNull() || m.MaxReceiveCount.IsUnknown() {
			m.MaxReceiveCount = types.Int64Value(defaultMaxReceiveCount)
		}
	}
	return true, nil
}

// redrivePolicy is the queue's RedrivePolicy attribute.
type redrivePolicy struct {
	DeadLetterTargetARN string `json:"deadLetterTargetArn"`
	// MaxReceiveCount is written as a number and read raw, so that a policy
	// set elsewhere with the count as a JSON string ("5") parses too.
	MaxReceiveCount json.RawMessage `json:"maxReceiveCount"`
}

// attributes are the queue attributes for m. prior is the queue's state on
// update (nil on create): a redrive policy it had and m does not is removed.
func (r *queueResource) attributes(m queueModel, prior *queueModel) map[string]string {
	a := map[string]string{
		"VisibilityTimeout":             strconv.FormatInt(m.VisibilityTimeout.ValueInt64(), 10),
		"MessageRetentionPeriod":        strconv.FormatInt(m.MessageRetention.ValueInt64(), 10),
		"SqsManagedSseEnabled":          "true",
		"ReceiveMessageWaitTimeSeconds": "1",
	}
	if arn := m.DeadLetterARN.ValueString(); arn != "" {
		count := json.RawMessage(strconv.FormatInt(m.MaxReceiveCount.ValueInt64(), 10))
		policy, _ := json.Marshal(redrivePolicy{DeadLetterTargetARN: arn, MaxReceiveCount: count})
		a["RedrivePolicy"] = string(policy)
	} else if prior != nil && prior.DeadLetterARN.ValueString() != "" {
		a["RedrivePolicy"] = "" // SQS drops the policy on an empty value
	}
	return a
}

// listTags returns the tags of the queue.
func (r *queueResource) listTags(ctx context.Context, url string) (map[string]string, error) {
	out, err := r.c.aws.SQS().ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(url)})
	if err != nil {
		return nil, err
	}
	if out.Tags == nil {
		return map[string]string{}, nil
	}
	return out.Tags, nil
}

// queueDeletedRecently: SQS keeps a deleted queue's name for 60 seconds.
func queueDeletedRecently(err error) bool {
	var recent *sqstypes.QueueDeletedRecently
	return errors.As(err, &recent) || awserr.Code(err) == "AWS.SimpleQueueService.QueueDeletedRecently"
}
