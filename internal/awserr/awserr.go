// Package awserr is the one vocabulary for AWS API errors in ghrunner: the
// code an answer carried, and whether it says "not found" or "already
// exists", for every service the provider and the fleet call.
//
// It reads codes rather than SDK error types: EC2 has no typed errors at
// all, and a code works the same whether the SDK decoded the answer into a
// typed error or a generic one.
package awserr

import (
	"errors"
	"strings"

	"github.com/aws/smithy-go"
)

// Code is the API error code in err's chain, or "" when err did not come
// from an AWS API answer.
func Code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// Message is the API error message in err's chain, or "".
func Message(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorMessage()
	}
	return ""
}

// notFound lists the codes by which the services we call say that the thing
// named does not exist (checked against the aws-sdk-go-v2 types). EC2's own
// codes end in ".NotFound" (InvalidInstanceID.NotFound,
// InvalidLaunchTemplateId.NotFound, …) and are matched by that suffix.
var notFound = map[string]bool{
	"NoSuchEntity":              true, // IAM
	"ResourceNotFoundException": true, // DynamoDB, Lambda, EventBridge Scheduler, CloudWatch Logs
	"ResourceNotFound":          true, // CloudWatch: a dashboard (DashboardNotFoundError) or an alarm
	"ParameterNotFound":         true, // SSM
	"NoSuchKey":                 true, // S3
	"NoSuchBucket":              true, // S3
	"NotFound":                  true, // S3 HeadObject and HeadBucket (a bare 404)
	// EC2's one not-found code that does not end in .NotFound.
	"InvalidLaunchTemplateName.NotFoundException": true,
	// SQS: the JSON protocol's code, and the query protocol's, which the SDK
	// reports in its place for compatibility.
	"QueueDoesNotExist":                       true,
	"AWS.SimpleQueueService.NonExistentQueue": true,
	// ECR and ECS (the listener's repository, cluster and service).
	"RepositoryNotFoundException": true,
	"ImageNotFoundException":      true,
	"ClusterNotFoundException":    true,
	"ServiceNotFoundException":    true,
	"ServiceNotActiveException":   true,
}

// IsNotFound reports an API error saying the resource does not exist. For
// an EC2 instance that is either "already gone for good" or "too new to be
// visible yet" (EC2 is eventually consistent); the caller knows which.
func IsNotFound(err error) bool {
	code := Code(err)
	return notFound[code] || strings.HasSuffix(code, ".NotFound")
}

// IgnoreNotFound is nil when err says the resource does not exist, and err
// otherwise: for deletes and cleanups, where "already gone" is success.
func IgnoreNotFound(err error) error {
	if IsNotFound(err) {
		return nil
	}
	return err
}

// alreadyExists lists the codes by which the services we call refuse to
// create something because it exists already.
var alreadyExists = map[string]bool{
	"EntityAlreadyExists":              true, // IAM
	"ResourceInUseException":           true, // DynamoDB CreateTable
	"ResourceConflictException":        true, // Lambda CreateFunction
	"ConflictException":                true, // EventBridge Scheduler CreateSchedule
	"ResourceAlreadyExistsException":   true, // CloudWatch Logs CreateLogGroup
	"RepositoryAlreadyExistsException": true, // ECR CreateRepository
	// EC2 CreateLaunchTemplate.
	"InvalidLaunchTemplateName.AlreadyExistsException": true,
}

// IsAlreadyExists reports an API error refusing to create a resource that
// exists already.
func IsAlreadyExists(err error) bool { return alreadyExists[Code(err)] }
