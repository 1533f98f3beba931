package provider

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

var (
	_ resource.Resource                = &tableResource{}
	_ resource.ResourceWithConfigure   = &tableResource{}
	_ resource.ResourceWithImportState = &tableResource{}
)

func newTableResource() resource.Resource { return &tableResource{} }

// tableResource is ghrunner_table: the DynamoDB state table of a deployment
// (docs/design.md).
type tableResource struct{ configured }

type tableModel struct {
	ID                  types.String `tfsdk:"id"`
	Name                types.String `tfsdk:"name"`
	PointInTimeRecovery types.Bool   `tfsdk:"point_in_time_recovery"`
	KMSKeyARN           types.String `tfsdk:"kms_key_arn"`
	Tags                types.Map    `tfsdk:"tags"`
	Stream              types.Bool   `tfsdk:"stream"`
	StreamARN           types.String `tfsdk:"stream_arn"`
	ARN                 types.String `tfsdk:"arn"`
}

var tableNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`)

func (r *tableResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_table"
}

func (r *tableResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The DynamoDB state table of a ghrunner deployment: key pk, the by-run and by-pool-state indexes, TTL on expiresAt, encryption at rest.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The table name.", PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, Description: "Table name.",
				Validators:    []validator.String{stringvalidator.RegexMatches(tableNameRE, "must be 3-255 characters of A-Z a-z 0-9 _ . -")},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"point_in_time_recovery": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				Description: "Keep continuous backups (point-in-time recovery)."},
			"kms_key_arn": schema.StringAttribute{Optional: true, Description: "Customer managed KMS key for encryption at rest; the AWS owned key when unset.",
				Validators:    []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^arn:aws[a-z-]*:kms:`), "must be a KMS key ARN (arn:aws:kms:…)")},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"tags": schema.MapAttribute{Optional: true, ElementType: types.StringType, Validators: tagValidators(),
				Description: "Tags of the table, merged over ghr:environment and the provider's default_tags (a key given here wins). Read back: a tag added, changed or removed outside Terraform shows in the plan (a provider tag only when changed or overridden)."},
			"stream": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				Description: "Keep a stream of the table's new item images, which the `jit` function reads: pools with `registration = \"jit\"` need it. Turning it off removes the stream (and the `jit` function's source)."},
			"stream_arn": schema.StringAttribute{Computed: true, Description: "The stream's ARN while `stream` is on.",
				PlanModifiers: []planmodifier.String{keepWhileStreamUnchanged{}}},
			"arn": schema.StringAttribute{Computed: true, Description: "Table ARN.", PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		},
	}
}

func (r *tableResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan tableModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	tags, diags := r.c.resourceTags(ctx, plan.Tags)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	db := r.c.aws.DynamoDB()
	// Point-in-time recovery comes after the table: DynamoDB refuses it for
	// a while after CreateTable (ContinuousBackupsUnavailableException).
	opts := state.TableOptions{KMSKeyARN: plan.KMSKeyARN.ValueString(), Tags: tags, Stream: plan.Stream.ValueBool()}
	if err := state.CreateTable(ctx, db, plan.Name.ValueString(), opts); err != nil {
		resp.Diagnostics.AddError("Creating the state table failed", err.Error())
		return
	}
	pitrErr := error(nil)
	if want := plan.PointInTimeRecovery.ValueBool(); want {
		pitrErr = retryWhile(ctx, 10*time.Second, 5*time.Minute, backupsUnavailable, func() error { return r.setPITR(ctx, plan.Name.ValueString(), true) })
	}
	want := plan.PointInTimeRecovery
	found, err := r.read(ctx, plan.Name.ValueString(), &plan)
	if err != nil || !found {
		resp.Diagnostics.AddError("Reading the new state table failed", fmt.Sprint(err))
		return
	}
	if pitrErr != nil {
		// The table exists and must be in state, not tainted (a tainted
		// state table would be replaced, records and all): keep what the
		// configuration asks, so the next plan's refresh sees the
		// difference and its apply enables recovery.
		plan.PointInTimeRecovery = want
		resp.Diagnostics.AddAttributeWarning(path.Root("point_in_time_recovery"), "Point-in-time recovery is not enabled yet",
			fmt.Sprintf("The table %s was created, but enabling point-in-time recovery failed: %v. Run terraform apply again to enable it.", plan.Name.ValueString(), pitrErr))
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *tableResource) setPITR(ctx context.Context, name string, on bool) error {
	_, err := r.c.aws.DynamoDB().UpdateContinuousBackups(ctx, &dynamodb.UpdateContinuousBackupsInput{TableName: aws.String(name),
		PointInTimeRecoverySpecification: &ddbtypes.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: aws.Bool(on)}})
	return err
}

// backupsUnavailable: DynamoDB is still setting up continuous backups of a
// new table.
func backupsUnavailable(err error) bool {
	var unavailable *ddbtypes.ContinuousBackupsUnavailableException
	return errors.As(err, &unavailable)
}

func (r *tableResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var st tableModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	found, err := r.read(ctx, st.ID.ValueString(), &st)
	if err != nil {
		resp.Diagnostics.AddError("Reading the state table failed", err.Error())
		return
	}
	if !found {
		resp.State.RemoveResource(ctx) // deleted outside Terraform: plan recreates it
		return
	}
	remote, err := r.listTags(ctx, st.ARN.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Reading the state table's tags failed", err.Error())
		return
	}
	var diags diag.Diagnostics
	st.Tags, diags = ownTags(ctx, r.c, remote, st.Tags)
	resp.Diagnostics.Append(diags...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

func (r *tableResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, st tableModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	db := r.c.aws.DynamoDB()
	name := st.ID.ValueString()
	if !plan.PointInTimeRecovery.Equal(st.PointInTimeRecovery) {
		err := retryWhile(ctx, 10*time.Second, 5*time.Minute, backupsUnavailable, func() error { return r.setPITR(ctx, name, plan.PointInTimeRecovery.ValueBool()) })
		if err != nil {
			resp.Diagnostics.AddError("Updating point-in-time recovery failed", err.Error())
			return
		}
	}
	if !plan.Stream.Equal(st.Stream) {
		if err := r.setStream(ctx, name, plan.Stream.ValueBool()); err != nil {
			resp.Diagnostics.AddError("Updating the table's stream failed", err.Error())
			return
		}
	}
	tags, diags := r.c.resourceTags(ctx, plan.Tags)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	arn := aws.String(st.ARN.ValueString())
	have, err := r.listTags(ctx, *arn)
	if err != nil {
		resp.Diagnostics.AddError("Reading the state table's tags failed", err.Error())
		return
	}
	set, remove := tagChanges(tags, have)
	if len(remove) > 0 {
		if _, err := db.UntagResource(ctx, &dynamodb.UntagResourceInput{ResourceArn: arn, TagKeys: remove}); err != nil {
			resp.Diagnostics.AddError("Removing tags failed", err.Error())
			return
		}
	}
	if len(set) > 0 {
		if _, err := db.TagResource(ctx, &dynamodb.TagResourceInput{ResourceArn: arn, Tags: dynamoDBTags(set)}); err != nil {
			resp.Diagnostics.AddError("Updating tags failed", err.Error())
			return
		}
	}
	if _, err := r.read(ctx, name, &plan); err != nil {
		resp.Diagnostics.AddError("Reading the state table failed", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *tableResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var st tableModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	db := r.c.aws.DynamoDB()
	_, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(st.ID.ValueString())})
	if awserr.IgnoreNotFound(err) != nil {
		resp.Diagnostics.AddError("Deleting the state table failed", err.Error())
		return
	}
	waiter := dynamodb.NewTableNotExistsWaiter(db)
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(st.ID.ValueString())}, 5*time.Minute); err != nil {
		resp.Diagnostics.AddError("Waiting for the state table to go failed", err.Error())
	}
}

// ImportState takes the table name.
func (r *tableResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
}

// read fills m from AWS; found is false when the table is gone. Tags are left
// alone: Read lists them, while Create and Update keep the tags they just
// wrote (DynamoDB's tag listing may lag behind a TagResource).
func (r *tableResource) read(ctx context.Context, name string, m *tableModel) (bool, error) {
	db := r.c.aws.DynamoDB()
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if awserr.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	m.ID, m.Name, m.ARN = types.StringValue(name), types.StringValue(name), types.StringValue(aws.ToString(out.Table.TableArn))
	on := out.Table.StreamSpecification != nil && aws.ToBool(out.Table.StreamSpecification.StreamEnabled)
	m.Stream, m.StreamARN = types.BoolValue(on), types.StringNull()
	if on {
		m.StreamARN = types.StringValue(aws.ToString(out.Table.LatestStreamArn))
	}
	backups, err := db.DescribeContinuousBackups(ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: aws.String(name)})
	if err != nil {
		return false, err
	}
	pitr := backups.ContinuousBackupsDescription != nil && backups.ContinuousBackupsDescription.PointInTimeRecoveryDescription != nil &&
		backups.ContinuousBackupsDescription.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus == ddbtypes.PointInTimeRecoveryStatusEnabled
	m.PointInTimeRecovery = types.BoolValue(pitr)
	return true, nil
}

// keepWhileStreamUnchanged keeps stream_arn from the state unless stream
// changes (a new stream has a new ARN; none has none).
type keepWhileStreamUnchanged struct{}

func (keepWhileStreamUnchanged) Description(context.Context) string {
	return "the stream's ARN stays while stream does not change"
}

func (m keepWhileStreamUnchanged) MarkdownDescription(ctx context.Context) string {
	return m.Description(ctx)
}

func (keepWhileStreamUnchanged) PlanModifyString(ctx context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if req.State.Raw.IsNull() {
		return // create: known after apply
	}
	var planned, had types.Bool
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("stream"), &planned)...)
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("stream"), &had)...)
	if !planned.IsUnknown() && planned.Equal(had) {
		resp.PlanValue = req.StateValue
	}
}

// setStream turns the table's stream of new images on or off and waits
// until the table is active again.
func (r *tableResource) setStream(ctx context.Context, name string, on bool) error {
	spec := &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(on)}
	if on {
		spec.StreamViewType = ddbtypes.StreamViewTypeNewImage
	}
	db := r.c.aws.DynamoDB()
	if _, err := db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(name), StreamSpecification: spec}); err != nil {
		return err
	}
	return dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 5*time.Minute)
}

// listTags returns the tags of the table. Should a key come back twice (moto
// appends on TagResource instead of replacing), the last value wins.
func (r *tableResource) listTags(ctx context.Context, arn string) (map[string]string, error) {
	out := map[string]string{}
	in := &dynamodb.ListTagsOfResourceInput{ResourceArn: aws.String(arn)}
	for {
		page, err := r.c.aws.DynamoDB().ListTagsOfResource(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, t := range page.Tags {
			out[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
		if aws.ToString(page.NextToken) == "" {
			return out, nil
		}
		in.NextToken = page.NextToken
	}
}

// tableHasStream says, as an error naming what to set, when the table has
// no stream of new images (just-in-time pools need one).
func tableHasStream(ctx context.Context, c *clients, table string) error {
	out, err := c.aws.DynamoDB().DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return err
	}
	if spec := out.Table.StreamSpecification; spec == nil || !aws.ToBool(spec.StreamEnabled) {
		return fmt.Errorf("table %q has no stream: set stream = true on its ghrunner_table (and deploy the jit function), or registration = \"token\"", table)
	}
	return nil
}

// stateTableARN is the ARN of the state table a function or a pool names.
// It also returns the table's KMS key when one encrypts it (the roles that
// use the table need it); "" for the AWS owned key.
func stateTableARN(ctx context.Context, c *clients, table string) (arn, key string, err error) {
	out, err := c.aws.DynamoDB().DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if awserr.IsNotFound(err) {
		return "", "", fmt.Errorf("table %q does not exist: create it with ghrunner_table and pass ghrunner_table.<name>.name", table)
	}
	if err != nil {
		return "", "", err
	}
	if sse := out.Table.SSEDescription; sse != nil && sse.SSEType == ddbtypes.SSETypeKms {
		key = aws.ToString(sse.KMSMasterKeyArn)
	}
	return aws.ToString(out.Table.TableArn), key, nil
}
