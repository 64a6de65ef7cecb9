package stack

import (
	"fmt"
	"slices"

	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/schema"
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Table actions, by what a function's routes need. Transactions have no IAM
// actions of their own: DynamoDB authorizes each item of a TransactWriteItems
// or TransactGetItems by the underlying PutItem/UpdateItem/DeleteItem/GetItem
// and ConditionCheckItem, so these lists cover them. Scan is in neither: the
// design reads through keys and the gsi1 index, never by scanning.
var (
	// readActions is what a ReadOnly function may do on the table and its indexes.
	readActions = []string{
		"dynamodb:GetItem",
		"dynamodb:BatchGetItem",
		"dynamodb:Query",
	}
	// writeActions is what a ReadWrite function may do on top of readActions.
	writeActions = []string{
		"dynamodb:PutItem",
		"dynamodb:UpdateItem",
		"dynamodb:DeleteItem",
		"dynamodb:BatchWriteItem",
		"dynamodb:ConditionCheckItem",
	}
	// streamActions is what a stream-triggered function's role needs for
	// Lambda to poll the table's stream on its behalf. They are granted on the
	// table's streams only ("<table arn>/stream/*"), not on "*" as
	// aws-lambda-event-sources' DynamoEventSource does for ListStreams.
	streamActions = []string{
		"dynamodb:DescribeStream",
		"dynamodb:GetRecords",
		"dynamodb:GetShardIterator",
		"dynamodb:ListStreams",
	}
)

// Stream trigger settings that the route table does not carry (batch size,
// window and partial batch failures come from each routes.Trigger). The
// webhook dispatcher retries deliveries itself (design §8: backoff, then
// dead-letter, driven by the schedule), so the event source mapping only has
// to survive a crashing batch: bisect to find the poison record, retry a few
// times, and park what still fails in an SQS queue rather than blocking the
// shard for the stream's 24 h retention.
const (
	StreamRetryAttempts  = 5
	StreamMaxRecordAgeS  = 3600
	FailureRetentionDays = 14
	// MaxStreamBatchSize and MaxStreamBatchWindowS are Lambda's limits for
	// a DynamoDB stream event source mapping.
	MaxStreamBatchSize    = 10000
	MaxStreamBatchWindowS = 300
	// MaxStreamFilters is Lambda's default quota of filters per event
	// source mapping.
	MaxStreamFilters = 5
)

// Reserved concurrency. Every function gets its own reservation, so that a
// flood of slow calls to one function (messy's 5 s `slow`, a translator
// waiting on its LLM) throttles that function alone and the ledger keeps
// answering: a reservation is both a floor no other function can take and a
// ceiling this one cannot pass. DefaultReservedConcurrency is sized for the
// fixtures (10 concurrent 5 s calls is 2 slow requests per second; 10 fast
// ones is hundreds), and five of them reserve 50 of an account's usual 1,000.
// AWS refuses reservations that leave less than MinUnreservedConcurrency
// unreserved, so validate checks the sum against AccountConcurrency before
// a deploy gets that far. New accounts may start with a quota of 10, where no
// reservation is possible: ask for the usual 1,000 first.
const (
	DefaultReservedConcurrency = 10
	DefaultAccountConcurrency  = 1000
	MinUnreservedConcurrency   = 100
)

// reservations is the reserved concurrency of every function of p.
func reservations(p Props) map[string]int {
	out := map[string]int{}
	for _, fn := range p.Functions {
		out[fn.Name] = max(DefaultReservedConcurrency, queueReservation(fn))
		if n, ok := p.ReservedConcurrency[fn.Name]; ok {
			out[fn.Name] = n
		}
	}
	return out
}

// addFunction creates one function with its own role, log group and
// triggers, all under a construct named after the function so that the
// template's logical ids say which function a resource belongs to.
func (s *Stack) addFunction(fn routes.Function, access routes.Access, table schema.Table, assetDir string, prod bool) {
	scope := constructs.NewConstruct(s.Stack, jsii.String(fn.Name))

	days, removal := retention(prod)
	logs := awslogs.NewLogGroup(scope, jsii.String("Logs"), &awslogs.LogGroupProps{
		Retention:     days,
		RemovalPolicy: removal,
	})

	// An explicit role instead of the default one: the default attaches
	// AWSLambdaBasicExecutionRole (logs on "*"); this one may write to its
	// own log group and nothing else until the grants below.
	role := awsiam.NewRole(scope, jsii.String("Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String(fmt.Sprintf("a2awire %s %s (table access: %s)", s.Stage, fn.Name, access)),
	})
	logs.GrantWrite(role)

	env := map[string]*string{}
	for k, v := range fn.Env {
		if k == NetworkPublicKeyEnv && v == "" {
			v = s.networkKey
		}
		if k == NetworkSigningKeyEnv && v == "" && s.signingSecret != "" {
			v = SigningKeyReference(s.signingSecret)
		}
		if k == StreamBaseURLEnv && v == "" {
			continue // the stream's function URL, once it exists (streamurl.go)
		}
		if k == BaseURLEnv && v == "" {
			// The stage URL depends on the API's id only, not on its
			// routes, so the functions the routes integrate can hold it.
			env[k] = s.APIStage.Url()
			continue
		}
		env[k] = jsii.String(v)
	}
	if access > routes.NoTable {
		env[TableNameEnv] = s.Table.TableName()
	}
	s.grantSends(fn, env, role)
	for _, tr := range fn.Triggers {
		if tr.Kind == routes.QueueTrigger {
			s.grantConsume(tr, role, env)
		}
	}
	f := awslambda.NewFunction(scope, jsii.String("Function"), &awslambda.FunctionProps{
		Description:  jsii.String(fmt.Sprintf("a2awire %s %s", s.Stage, fn.Name)),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(assetDir), nil),
		MemorySize:   jsii.Number(float64(fn.MemoryMB)),
		Timeout:      awscdk.Duration_Seconds(jsii.Number(float64(fn.TimeoutSeconds))),
		Environment:  &env,
		Role:         role,
		LogGroup:     logs,
		// The functions log JSON lines (log/slog) that carry the request
		// id; in JSON format Lambda keeps them as objects, adds its own
		// platform lines as JSON too, and filters by the "level" field.
		LoggingFormat:                awslambda.LoggingFormat_JSON,
		ApplicationLogLevelV2:        awslambda.ApplicationLogLevel_INFO,
		SystemLogLevelV2:             awslambda.SystemLogLevel_INFO,
		ReservedConcurrentExecutions: jsii.Number(float64(s.Reserved[fn.Name])),
	})
	s.Functions[fn.Name] = f
	s.Roles[fn.Name] = role
	suppress(f, nagFunctionTracing)
	if fn.Name == s.seedFunction {
		suppress(f, nagFunctionDLQCustomResource)
	} else if !slices.ContainsFunc(fn.Triggers, func(tr routes.Trigger) bool { return tr.Kind == routes.ScheduleTrigger }) {
		// Only the schedule invokes a function asynchronously; HTTP and
		// stream invocations are synchronous, where a DLQ never fires.
		suppress(f, nagFunctionDLQSync)
	}

	// The table and each of its indexes by name: no "index/*" wildcard.
	resources := []*string{s.Table.TableArn()}
	for _, idx := range table.Indexes {
		resources = append(resources, jsii.String(*s.Table.TableArn()+"/index/"+idx.Name))
	}
	switch access {
	case routes.ReadOnly:
		role.AddToPolicy(allow(readActions, resources))
	case routes.ReadWrite:
		role.AddToPolicy(allow(append(slices.Clone(readActions), writeActions...), resources))
	}

	for _, tr := range fn.Triggers {
		switch tr.Kind {
		case routes.StreamTrigger:
			s.addStreamTrigger(scope, fn.Name, tr, f, role, prod)
		case routes.ScheduleTrigger:
			s.addSchedule(scope, fn.Name, tr.Schedule, f)
		case routes.QueueTrigger:
			s.addQueueTrigger(scope, tr, f)
		}
	}
}

// addSchedule invokes the function on an EventBridge schedule. It writes
// the rule and the invoke permission at the CloudFormation level because
// aws-events-targets, the L2 way, compiles some forty more CDK packages into
// this module for one Lambda target.
func (s *Stack) addSchedule(scope constructs.Construct, name, schedule string, f awslambda.Function) {
	rule := awsevents.NewCfnRule(scope, jsii.String("Schedule"), &awsevents.CfnRuleProps{
		Description:        jsii.String(fmt.Sprintf("a2awire %s %s: %s", s.Stage, name, schedule)),
		ScheduleExpression: jsii.String(schedule),
		State:              jsii.String("ENABLED"),
		Targets: &[]any{&awsevents.CfnRule_TargetProperty{
			Id:  jsii.String("Function"),
			Arn: f.FunctionArn(),
			// A missed tick is harmless: the next one comes a minute later.
			RetryPolicy: &awsevents.CfnRule_RetryPolicyProperty{MaximumRetryAttempts: jsii.Number(0)},
		}},
	})
	suppress(rule, nagScheduleDLQ)
	suppress(f, nagFunctionDLQSchedule)
	f.AddPermission(jsii.String("ScheduleInvoke"), &awslambda.Permission{
		Principal: awsiam.NewServicePrincipal(jsii.String("events.amazonaws.com"), nil),
		Action:    jsii.String("lambda:InvokeFunction"),
		SourceArn: rule.AttrArn(),
	})
}

// addStreamTrigger feeds the function from the table's stream with the
// trigger's batch size, window and partial-failure reporting. It uses a
// plain EventSourceMapping rather than DynamoEventSource because the latter
// grants dynamodb:ListStreams on Resource "*".
func (s *Stack) addStreamTrigger(scope constructs.Construct, name string, tr routes.Trigger, f awslambda.Function, role awsiam.Role, prod bool) {
	removal := awscdk.RemovalPolicy_DESTROY
	if prod {
		removal = awscdk.RemovalPolicy_RETAIN
	}
	queue := awssqs.NewQueue(scope, jsii.String("StreamFailures"), &awssqs.QueueProps{
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(FailureRetentionDays)),
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RemovalPolicy:   removal,
	})
	suppress(queue, nagFailureQueueIsDLQ...)
	s.FailureQueues[name] = queue
	// The grant goes into the role's default policy, which the function
	// depends on, so the mapping (which depends on the function) is created
	// only once Lambda may read the stream.
	role.AddToPolicy(allow(streamActions, []*string{jsii.String(*s.Table.TableArn() + "/stream/*")}))
	// The statement lands in the role's default policy, where cdk-nag
	// finds it.
	suppress(role.Node().FindChild(jsii.String("DefaultPolicy")), nagStreamWildcard)
	props := &awslambda.EventSourceMappingProps{
		Target:                  f,
		EventSourceArn:          s.Table.TableStreamArn(),
		StartingPosition:        awslambda.StartingPosition_LATEST,
		BatchSize:               jsii.Number(float64(StreamBatchSize(tr))),
		BisectBatchOnError:      jsii.Bool(true),
		RetryAttempts:           jsii.Number(StreamRetryAttempts),
		MaxRecordAge:            awscdk.Duration_Seconds(jsii.Number(StreamMaxRecordAgeS)),
		ReportBatchItemFailures: jsii.Bool(tr.ReportBatchItemFailures),
		OnFailure:               awslambdaeventsources.NewSqsDlq(queue),
	}
	// The route table's filters, as the harness applies them: records no
	// pattern matches never invoke the function (nor count as failures).
	for _, pattern := range tr.Patterns() {
		filters := []*map[string]any{}
		if props.Filters != nil {
			filters = *props.Filters
		}
		filters = append(filters, &map[string]any{"pattern": pattern})
		props.Filters = &filters
	}
	if tr.BatchWindowSeconds > 0 {
		props.MaxBatchingWindow = awscdk.Duration_Seconds(jsii.Number(float64(tr.BatchWindowSeconds)))
	}
	awslambda.NewEventSourceMapping(scope, jsii.String("TableStream"), props)
}

// StreamBatchSize is the batch size a stream trigger is deployed with: its
// own, or routes.DefaultStreamBatchSize when unset, as the harness reads it.
func StreamBatchSize(tr routes.Trigger) int {
	if tr.BatchSize == 0 {
		return routes.DefaultStreamBatchSize
	}
	return tr.BatchSize
}

func allow(actions []string, resources []*string) awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Effect:    awsiam.Effect_ALLOW,
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	})
}

// accessByFunction is routes.TableAccess computed over the inputs rather than
// the package table: the union of each function's own setting and its routes'.
func accessByFunction(p Props) map[string]routes.Access {
	out := map[string]routes.Access{}
	for _, fn := range p.Functions {
		out[fn.Name] = fn.Table
	}
	for _, r := range p.Routes {
		out[r.Function] = max(out[r.Function], r.Table)
	}
	return out
}

var httpMethods = map[string]awsapigatewayv2.HttpMethod{
	"ANY":     awsapigatewayv2.HttpMethod_ANY,
	"GET":     awsapigatewayv2.HttpMethod_GET,
	"POST":    awsapigatewayv2.HttpMethod_POST,
	"PUT":     awsapigatewayv2.HttpMethod_PUT,
	"PATCH":   awsapigatewayv2.HttpMethod_PATCH,
	"DELETE":  awsapigatewayv2.HttpMethod_DELETE,
	"HEAD":    awsapigatewayv2.HttpMethod_HEAD,
	"OPTIONS": awsapigatewayv2.HttpMethod_OPTIONS,
}
