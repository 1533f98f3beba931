package fleet

import (
	"context"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// SetTags sets (adds or overwrites) tags on instances.
func (f *Fleet) SetTags(ctx context.Context, ids []string, tags map[string]string) error {
	ids = distinct(ids)
	if len(ids) == 0 || len(tags) == 0 {
		return nil
	}
	if _, err := f.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: ids, Tags: ec2Tags(tags)}); err != nil {
		return fmt.Errorf("tag %v: %w", ids, err)
	}
	return nil
}

// RemoveTags removes tag keys, whatever their values, from instances.
func (f *Fleet) RemoveTags(ctx context.Context, ids []string, keys ...string) error {
	ids = distinct(ids)
	// DeleteTags without keys deletes every tag, ghr:environment included,
	// which would hide the instance from List: never send that.
	if len(ids) == 0 || len(keys) == 0 {
		return nil
	}
	tags := make([]types.Tag, len(keys))
	for i, k := range keys {
		tags[i] = types.Tag{Key: aws.String(k)}
	}
	if _, err := f.ec2.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: ids, Tags: tags}); err != nil {
		return fmt.Errorf("untag %v: %w", ids, err)
	}
	return nil
}

// TagOrphan marks an instance as an orphan candidate, noting the assignment
// it has now: phase 1 of scale-down terminates it only while that
// assignment still holds, so a later claim cancels the mark.
func (f *Fleet) TagOrphan(ctx context.Context, id, assignment string) error {
	switch {
	case id == "":
		return invalid("id", "required")
	case assignment == "":
		return invalid("assignment", "required: it is the tag's value")
	}
	return f.SetTags(ctx, []string{id}, map[string]string{TagOrphan: assignment})
}

// UntagOrphan removes the orphan mark (a false positive).
func (f *Fleet) UntagOrphan(ctx context.Context, id string) error {
	return f.RemoveTags(ctx, []string{id}, TagOrphan)
}

// ec2Tags turns a map into EC2 tags, sorted by key so requests are stable.
func ec2Tags(m map[string]string) []types.Tag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tags := make([]types.Tag, len(keys))
	for i, k := range keys {
		tags[i] = types.Tag{Key: aws.String(k), Value: aws.String(m[k])}
	}
	return tags
}
