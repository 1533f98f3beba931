package awserr

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	logstypes "github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"
)

// ec2Error is an EC2 answer: EC2 has no typed errors, only codes.
func ec2Error(code string) error {
	return &smithy.GenericAPIError{Code: code, Message: "injected", Fault: smithy.FaultClient}
}

// The SDK's own error types, so that a code renamed in an SDK update fails
// here rather than in a resource that stops recognising it.
func TestClassify(t *testing.T) {
	cases := []struct {
		name                    string
		err                     error
		code                    string
		notFound, alreadyExists bool
	}{
		{"iam no such entity", &iamtypes.NoSuchEntityException{}, "NoSuchEntity", true, false},
		{"iam entity already exists", &iamtypes.EntityAlreadyExistsException{}, "EntityAlreadyExists", false, true},
		{"iam delete conflict", &iamtypes.DeleteConflictException{}, "DeleteConflict", false, false},
		{"ec2 instance not found", ec2Error("InvalidInstanceID.NotFound"), "InvalidInstanceID.NotFound", true, false},
		{"ec2 template id not found", ec2Error("InvalidLaunchTemplateId.NotFound"), "InvalidLaunchTemplateId.NotFound", true, false},
		{"ec2 template name not found", ec2Error("InvalidLaunchTemplateName.NotFoundException"), "InvalidLaunchTemplateName.NotFoundException", true, false},
		{"ec2 template name taken", ec2Error("InvalidLaunchTemplateName.AlreadyExistsException"), "InvalidLaunchTemplateName.AlreadyExistsException", false, true},
		{"ec2 image not found", ec2Error("InvalidAMIID.NotFound"), "InvalidAMIID.NotFound", true, false},
		{"ec2 malformed id", ec2Error("InvalidInstanceID.Malformed"), "InvalidInstanceID.Malformed", false, false},
		{"ec2 template version missing", ec2Error("InvalidLaunchTemplateId.VersionNotFound"), "InvalidLaunchTemplateId.VersionNotFound", false, false},
		{"ec2 throttled", ec2Error("RequestLimitExceeded"), "RequestLimitExceeded", false, false},
		{"dynamodb table not found", &ddbtypes.ResourceNotFoundException{}, "ResourceNotFoundException", true, false},
		{"dynamodb table in use", &ddbtypes.ResourceInUseException{}, "ResourceInUseException", false, true},
		{"dynamodb condition failed", &ddbtypes.ConditionalCheckFailedException{}, "ConditionalCheckFailedException", false, false},
		{"sqs queue does not exist", &sqstypes.QueueDoesNotExist{}, "QueueDoesNotExist", true, false},
		{"sqs queue does not exist, query code", &sqstypes.QueueDoesNotExist{ErrorCodeOverride: aws.String("AWS.SimpleQueueService.NonExistentQueue")},
			"AWS.SimpleQueueService.NonExistentQueue", true, false},
		{"lambda function not found", &lambdatypes.ResourceNotFoundException{}, "ResourceNotFoundException", true, false},
		{"lambda function exists", &lambdatypes.ResourceConflictException{}, "ResourceConflictException", false, true},
		{"lambda bad parameter", &lambdatypes.InvalidParameterValueException{}, "InvalidParameterValueException", false, false},
		{"scheduler schedule not found", &schedtypes.ResourceNotFoundException{}, "ResourceNotFoundException", true, false},
		{"scheduler schedule exists", &schedtypes.ConflictException{}, "ConflictException", false, true},
		{"scheduler validation", &schedtypes.ValidationException{}, "ValidationException", false, false},
		{"s3 no such key", &s3types.NoSuchKey{}, "NoSuchKey", true, false},
		{"s3 no such bucket", &s3types.NoSuchBucket{}, "NoSuchBucket", true, false},
		{"s3 head 404", &s3types.NotFound{}, "NotFound", true, false},
		{"ssm parameter not found", &ssmtypes.ParameterNotFound{}, "ParameterNotFound", true, false},
		{"logs group not found", &logstypes.ResourceNotFoundException{}, "ResourceNotFoundException", true, false},
		{"logs group exists", &logstypes.ResourceAlreadyExistsException{}, "ResourceAlreadyExistsException", false, true},
		{"wrapped", fmt.Errorf("delete role r: %w", &iamtypes.NoSuchEntityException{}), "NoSuchEntity", true, false},
		{"joined", errors.Join(errors.New("first"), fmt.Errorf("x: %w", ec2Error("InvalidInstanceID.NotFound"))), "InvalidInstanceID.NotFound", true, false},
		{"not an API error", errors.New("NoSuchEntity: the role is gone"), "", false, false},
		{"nil", nil, "", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Code(c.err); got != c.code {
				t.Errorf("Code = %q, want %q", got, c.code)
			}
			if got := IsNotFound(c.err); got != c.notFound {
				t.Errorf("IsNotFound = %v, want %v", got, c.notFound)
			}
			if got := IsAlreadyExists(c.err); got != c.alreadyExists {
				t.Errorf("IsAlreadyExists = %v, want %v", got, c.alreadyExists)
			}
			got := IgnoreNotFound(c.err)
			if c.notFound && got != nil || !c.notFound && got != c.err {
				t.Errorf("IgnoreNotFound = %v, want %v", got, map[bool]error{true: nil, false: c.err}[c.notFound])
			}
		})
	}
}
