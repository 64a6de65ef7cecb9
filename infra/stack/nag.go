package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// Nag applies cdk-nag's AwsSolutions and Serverless rule packs to every
// stack under scope: at synthesis each finding becomes an error or warning
// annotation (which fails `cdk synth` and the infra tests), unless the
// resource carries a suppression from this file saying why the design
// accepts it. With reports, each pack also writes a CSV of every rule and
// resource (compliant, non-compliant, suppressed with its reason) into the
// cloud assembly directory.
func Nag(scope constructs.IConstruct, reports bool) {
	props := &cdknag.NagPackProps{Reports: jsii.Bool(reports), Verbose: jsii.Bool(true)}
	awscdk.Aspects_Of(scope).Add(cdknag.NewAwsSolutionsChecks(props), nil)
	awscdk.Aspects_Of(scope).Add(cdknag.NewServerlessChecks(props), nil)
}

// NagSuppression is one accepted cdk-nag finding: the rule, why the design
// accepts it, and (for IAM findings) a regular expression, in cdk-nag's
// /.../ form, for the exact grant it covers.
type NagSuppression struct {
	ID        string
	Reason    string
	AppliesTo string
}

// Suppressions, each with the reason the design accepts the finding. They
// are attached to the one resource (and its children) they concern, never to
// the whole stack, so a new resource is checked in full.
var (
	nagRouteAuth = NagSuppression{
		ID: "AwsSolutions-APIG4",
		Reason: "Routes are public at the gateway by design: the invocation protocol is open to any " +
			"buyer, and signed, member and owner routes are authenticated by the function itself " +
			"(AWN-Ed25519 request signatures), which an API Gateway authorizer cannot verify.",
	}
	nagFunctionTracing = NagSuppression{
		ID: "Serverless-LambdaTracing",
		Reason: "The functions are not instrumented for X-Ray; a request is followed through the stage's JSON " +
			"access log (integrationRequestId) into the function's JSON log lines, which carry the same Lambda " +
			"request id. Active tracing would add cost and an xray:* grant on \"*\" for segments nobody reads.",
	}
	nagFunctionDLQSync = NagSuppression{
		ID: "Serverless-LambdaDLQ",
		Reason: "The function is only invoked synchronously (API Gateway) or by an event source mapping; a " +
			"Lambda dead-letter queue applies to asynchronous invocations only and would never receive anything. " +
			"Stream batches that keep failing go to the mapping's own SQS on-failure destination.",
	}
	nagFunctionDLQSchedule = NagSuppression{
		ID: "Serverless-LambdaDLQ",
		Reason: "The only asynchronous invocation is the EventBridge schedule tick, which carries no data and is " +
			"not retried (the function's EventInvokeConfig: 0 retries, 60 s maximum age): a lost tick is made up " +
			"by the next one, so there is nothing a dead-letter queue could hold for replay.",
	}
	nagFunctionDLQCustomResource = NagSuppression{
		ID: "Serverless-LambdaDLQ",
		Reason: "CloudFormation invokes this custom-resource handler once per deploy and waits for its answer at a " +
			"presigned response URL: an invocation that fails fails (and rolls back) the deploy, which is simply run " +
			"again, so a dead-letter queue would only hold events whose response URLs have expired.",
	}
	nagScheduleDLQ = NagSuppression{
		ID: "Serverless-EventBusDLQ",
		Reason: "The rule is a schedule whose events carry no data and whose retries are off on purpose, both the " +
			"rule target's (MaximumRetryAttempts 0) and Lambda's asynchronous ones (EventInvokeConfig " +
			"MaximumRetryAttempts 0): a missed tick is made up by the next one.",
	}
	nagScheduleFailureDestination = NagSuppression{
		ID: "Serverless-LambdaAsyncFailureDestination",
		Reason: "The function's only asynchronous invocation is the EventBridge schedule tick, which carries no " +
			"data and is not retried: a failed tick is made up by the next one a minute later, so an on-failure " +
			"destination would only collect empty events. Failures show in the function's Errors alarm.",
	}
	nagAlarmEmailRedrive = NagSuppression{
		ID: "Serverless-SNSRedrivePolicy",
		Reason: "The subscription delivers alarm notifications by email; the alarm's state and history stay in " +
			"CloudWatch whether or not a message is delivered, so a dead-letter queue of undelivered notifications " +
			"would hold nothing that is not already there, and nobody would read it.",
	}
	nagFailureQueueIsDLQ = []NagSuppression{
		{
			ID: "AwsSolutions-SQS3",
			Reason: "This queue is itself the dead-letter (on-failure) destination of the stream's event source " +
				"mapping; a dead-letter queue of its own would only move the same records one hop further.",
		},
		{
			ID: "Serverless-SQSRedrivePolicy",
			Reason: "This queue is itself the dead-letter (on-failure) destination of the stream's event source " +
				"mapping, read by an operator, not by a consumer that could fail and need a redrive policy.",
		},
	}
	// cdk-nag's AwsSolutions-SQS3 knows a queue that is another's
	// dead-letter queue; the Serverless pack does not.
	nagQueueIsDLQ = []NagSuppression{
		{
			ID: "Serverless-SQSRedrivePolicy",
			Reason: "This queue is itself a dead-letter queue of the queue table (webhook deliveries, queued world " +
				"actions): a redrive policy of its own would only move the same messages one hop further. A message " +
				"stays here for the retention period, for its consumer (the webhook's dead letters) or for SQS's " +
				"redrive back to its source queue, and its age alarm reports it.",
		},
	}
	nagQueueMappingDestination = NagSuppression{
		ID: "Serverless-LambdaEventSourceMappingDestination",
		Reason: "An SQS event source mapping has no on-failure destination: a message its function keeps failing on " +
			"moves to the queue's dead-letter queue through the queue's redrive policy (maxReceiveCount).",
	}
	nagStreamWildcard = NagSuppression{
		ID: "AwsSolutions-IAM5",
		Reason: "Lambda polls the table's stream on the role's behalf; the stream ARN ends in a label DynamoDB " +
			"assigns whenever the stream is (re)enabled, so the grant names the table's streams " +
			"(<table arn>/stream/*), confined to this one table, and no other resource.",
		AppliesTo: `/^Resource::<Table[0-9A-F]+\.Arn>\/stream\/\*$/`,
	}
)

// suppress attaches suppressions to c's CloudFormation resource (c itself,
// or its default child for a higher-level construct) and to nothing else,
// so each one covers exactly the resource its reason is about; the infra
// tests fail on a suppression no finding uses.
func suppress(c constructs.IConstruct, ss ...NagSuppression) {
	if child := c.Node().DefaultChild(); child != nil {
		c = child
	}
	list := make([]*cdknag.NagPackSuppression, 0, len(ss))
	for _, s := range ss {
		sup := &cdknag.NagPackSuppression{Id: jsii.String(s.ID), Reason: jsii.String(s.Reason)}
		if s.AppliesTo != "" {
			sup.AppliesTo = &[]any{&cdknag.RegexAppliesTo{Regex: jsii.String(s.AppliesTo)}}
		}
		list = append(list, sup)
	}
	cdknag.NagSuppressions_AddResourceSuppressions(c, &list, jsii.Bool(false))
}
