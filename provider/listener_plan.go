package provider

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// fargateSizes are the task sizes Fargate runs (Linux), from the table
// "Task CPU and memory" of the Amazon ECS Developer Guide (Fargate task
// definition parameters): for each CPU value, memory from min to max MiB in
// steps of step.
var fargateSizes = []struct{ cpu, min, max, step int64 }{
	{256, 512, 2048, 0}, // 512, 1024 or 2048: the one row that is a list
	{512, 1024, 4096, 1024},
	{1024, 2048, 8192, 1024},
	{2048, 4096, 16384, 1024},
	{4096, 8192, 30720, 1024},
	{8192, 16384, 61440, 4096},
	{16384, 32768, 122880, 8192},
}

func fargateCPUs() []int64 {
	out := make([]int64, 0, len(fargateSizes))
	for _, s := range fargateSizes {
		out = append(out, s.cpu)
	}
	return out
}

// fargateMemory says whether Fargate runs memory MiB with cpu units.
func fargateMemory(cpu, memory int64) bool {
	for _, s := range fargateSizes {
		if s.cpu != cpu {
			continue
		}
		if s.step == 0 {
			return slices.Contains([]int64{512, 1024, 2048}, memory)
		}
		return memory >= s.min && memory <= s.max && (memory-s.min)%s.step == 0
	}
	return false
}

// fargateRow is one row of the table, for messages.
func fargateRow(cpu int64) string {
	for _, s := range fargateSizes {
		if s.cpu == cpu {
			if s.step == 0 {
				return "512, 1024 or 2048"
			}
			return fmt.Sprintf("%d to %d in steps of %d", s.min, s.max, s.step)
		}
	}
	return ""
}

// fargateTable is the whole table, for the documentation.
func fargateTable() string {
	rows := make([]string, 0, len(fargateSizes))
	for _, s := range fargateSizes {
		rows = append(rows, "cpu "+strconv.FormatInt(s.cpu, 10)+": "+fargateRow(s.cpu))
	}
	return strings.Join(rows, "; ")
}

// fargateSizeValidator refuses a memory size Fargate does not run with
// the cpu given, at plan time.
type fargateSizeValidator struct{}

func (fargateSizeValidator) Description(context.Context) string {
	return "memory must be a size Fargate allows with cpu"
}

func (v fargateSizeValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (fargateSizeValidator) ValidateResource(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var cpu, memory types.Int64
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("cpu"), &cpu)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("memory"), &memory)...)
	if resp.Diagnostics.HasError() || cpu.IsUnknown() || memory.IsUnknown() {
		return
	}
	c, m := int64(256), int64(512) // the defaults
	if !cpu.IsNull() {
		c = cpu.ValueInt64()
	}
	if !memory.IsNull() {
		m = memory.ValueInt64()
	}
	if fargateRow(c) == "" {
		return // the cpu attribute's own validator says so
	}
	if !fargateMemory(c, m) {
		resp.Diagnostics.AddAttributeError(path.Root("memory"), "Invalid Fargate task size",
			fmt.Sprintf("memory: %d MiB is not a size Fargate runs with cpu %d; with cpu %d use %s (AWS's Fargate task size table)", m, c, c, fargateRow(c)))
	}
}
