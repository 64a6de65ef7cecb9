package stack

import (
	"fmt"
	"slices"
	"strings"

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

// Table actions, by what a function's routes need: exactly the calls the
// store's DynamoDB engine makes (shared/store/dynamo: GetItem, Query,
// PutItem, UpdateItem, DeleteItem, TransactWriteItems). Transactions have no
// IAM action of their own: DynamoDB authorizes each item of a
// TransactWriteItems by the underlying PutItem/UpdateItem/DeleteItem and
// ConditionCheckItem, so these lists cover them. No Batch* action (the
// engine never batches), no Scan (the design reads through keys and the
// gsi1 index).
var (
	// readActions is what a ReadOnly function may do on the table and its indexes.
	readActions = []string{
		"dynamodb:GetItem",
		"dynamodb:Query",
	}
	// writeActions is what a ReadWrite function may do on top of readActions.
	writeActions = []string{
		"dynamodb:PutItem",
		"dynamodb:UpdateItem",
		"dynamodb:DeleteItem",
		"dynamodb:ConditionCheckItem",
	}
	// streamActions is what a stream-triggered function's role needs for
	// Lambda to poll the table's stream on its behalf, granted on the
	// table's streams only ("<table arn>/stream/*"). dynamodb:ListStreams is
	// not among them: it takes no resource (only "*" authorizes it), so on
	// the stream ARN it authorized nothing, and the event source mapping is
	// given the stream's ARN, so it never lists streams.
	streamActions = []string{
		"dynamodb:DescribeStream",
		"dynamodb:GetRecords",
		"dynamodb:GetShardIterator",
	}
)

// Stream trigger settings that the route table does not carry (batch size,
// window, partial batch failures, retries, record age and bisection come
// from each routes.Trigger). Every stream mapping parks what it gives up on
// in its own SQS queue, kept 14 days, rather than blocking the shard for the
// stream's 24 h retention; cmd/a2awire-redrive replays it from the stream.
const (
	FailureRetentionDays = 14
	// MaxStreamBatchSize and MaxStreamBatchWindowS are Lambda's limits for
	// a DynamoDB stream event source mapping.
	MaxStreamBatchSize    = 10000
	MaxStreamBatchWindowS = 300
	// MaxStreamFilters is Lambda's default quota of filters per event
	// source mapping.
	MaxStreamFilters = 5
)

// Reserved concurrency is opt-in, per function class or per function
// (context reservedConcurrency, see ReservationKeys): by default no
// function reserves any. A reservation is both a floor no other function
// can take and a ceiling this one cannot pass, which is worth having once
// real traffic shows a function that must not be starved (the ledger) or
// must not starve the others (messy's 5 s `slow`). By default it is a
// deploy failure: AWS refuses any reservation that leaves less than
// MinUnreservedConcurrency of the account's quota unreserved, and new
// accounts start with a quota as low as 10, where a single reservation
// fails the first function's creation and rolls the stack back.
// validateConcurrency checks the sum against AccountConcurrency before a
// deploy gets that far, and ConcurrencyPlan says what the account must
// allow.
const (
	DefaultAccountConcurrency = 1000
	MinUnreservedConcurrency  = 100
)

// FunctionClass is the class a function's reservation may be given by:
// the first word of its name ("fixture", "world", "registry", "webhook",
// "agent"), for the functions that callers or a queue or stream can flood
// (those with routes, or a stream or queue trigger). The others (a
// scheduled run, the deploy's registration) run one at a time; they have
// no class and are reserved only by their own name.
func FunctionClass(fn routes.Function, rs []routes.Route) string {
	floods := slices.ContainsFunc(rs, func(r routes.Route) bool { return r.Function == fn.Name }) ||
		slices.ContainsFunc(fn.Triggers, func(tr routes.Trigger) bool { return tr.Kind != routes.ScheduleTrigger })
	if !floods {
		return ""
	}
	class, _, _ := strings.Cut(fn.Name, "-")
	return class
}

// reservations is the reserved concurrency of the functions of p that have
// one: by name first, else by class.
func reservations(p Props) map[string]int {
	out := map[string]int{}
	for _, fn := range p.Functions {
		if n, ok := p.ReservedConcurrency[fn.Name]; ok {
			out[fn.Name] = n
		} else if n, ok := p.ReservedConcurrency[FunctionClass(fn, p.Routes)]; ok && FunctionClass(fn, p.Routes) != "" {
			out[fn.Name] = n
		}
	}
	return out
}

// ConcurrencyPlan is what the stack asks of the account's Lambda
// concurrency, for the pre-deploy check.
type ConcurrencyPlan struct {
	// Reserved is each reserving function's reservation, Total their sum.
	Reserved map[string]int
	Total    int
	// RequiredQuota is the smallest account quota the reservations
	// deploy on: Total plus the MinUnreservedConcurrency AWS keeps.
	RequiredQuota int
	// QueuePeaks are the unreserved functions whose queue trigger alone
	// may run this many at once (its maximum concurrency): the account
	// quota should cover them too, or Lambda throttles the poller.
	QueuePeaks map[string]int
}

// PlanConcurrency computes the plan of p.
func PlanConcurrency(p Props) ConcurrencyPlan {
	plan := ConcurrencyPlan{Reserved: reservations(p), QueuePeaks: map[string]int{}}
	for _, n := range plan.Reserved {
		plan.Total += n
	}
	plan.RequiredQuota = plan.Total + MinUnreservedConcurrency
	for _, fn := range p.Functions {
		if _, ok := plan.Reserved[fn.Name]; !ok {
			if n := queueReservation(fn); n > 0 {
				plan.QueuePeaks[fn.Name] = n
			}
		}
	}
	return plan
}

// String is the plan as the pre-deploy check prints it.
func (c ConcurrencyPlan) String() string {
	var b strings.Builder
	if c.Total == 0 {
		fmt.Fprintf(&b, "no reserved concurrency (reservedConcurrency unset): any account quota deploys")
	} else {
		fmt.Fprintf(&b, "reserved concurrency %d over %d functions %v: the account's Lambda concurrency quota must be at least %d (AWS keeps %d unreserved)",
			c.Total, len(c.Reserved), c.Reserved, c.RequiredQuota, MinUnreservedConcurrency)
	}
	peak := 0
	for _, n := range c.QueuePeaks {
		peak += n
	}
	if peak > 0 {
		fmt.Fprintf(&b, "; queue consumers may run %d more at once %v (a quota of %d or more serves them unthrottled)", peak, c.QueuePeaks, c.RequiredQuota+peak)
	}
	return b.String()
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
			env[k] = s.publicURL
			continue
		}
		env[k] = jsii.String(v)
	}
	if access > routes.NoTable {
		env[TableNameEnv] = s.Table.TableName()
	}
	if fn.Name == s.seedFunction && s.signingSecret != "" {
		// The registration checks the key the signing functions get.
		env[NetworkSigningKeyEnv] = jsii.String(SigningKeyReference(s.signingSecret))
	}
	s.grantSends(fn, env, role)
	for _, tr := range fn.Triggers {
		if tr.Kind == routes.QueueTrigger {
			s.grantConsume(tr, role, env)
		}
	}
	var reserved *float64
	if n, ok := s.Reserved[fn.Name]; ok {
		reserved = jsii.Number(float64(n))
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
		ReservedConcurrentExecutions: reserved,
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

// ScheduleMaxEventAgeS is how long a scheduled tick may wait in Lambda's
// asynchronous queue (Lambda's minimum): the next tick comes a minute later.
const ScheduleMaxEventAgeS = 60

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
	// Lambda's own asynchronous retries (two by default, spread over
	// minutes) would rerun a failed tick while later ticks run: a tick
	// runs once, and one older than a minute is dropped for the next.
	f.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		RetryAttempts: jsii.Number(0),
		MaxEventAge:   awscdk.Duration_Seconds(jsii.Number(ScheduleMaxEventAgeS)),
	})
	suppress(f.Node().FindChild(jsii.String("EventInvokeConfig")), nagScheduleFailureDestination)
	f.AddPermission(jsii.String("ScheduleInvoke"), &awslambda.Permission{
		Principal: awsiam.NewServicePrincipal(jsii.String("events.amazonaws.com"), nil),
		Action:    jsii.String("lambda:InvokeFunction"),
		SourceArn: rule.AttrArn(),
	})
}

// addStreamTrigger feeds the function from the table's stream with the
// trigger's batch size, window and partial-failure reporting. It uses a
// plain EventSourceMapping rather than DynamoEventSource because the latter
// grants dynamodb:ListStreams on Resource "*". The mapping starts at the
// stream's oldest record (TRIM_HORIZON), not LATEST: records written while
// the mapping is being created or replaced would otherwise never reach the
// function, and on a new stack there is nothing older to replay.
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
		StartingPosition:        awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:               jsii.Number(float64(StreamBatchSize(tr))),
		BisectBatchOnError:      jsii.Bool(tr.BisectOnError),
		RetryAttempts:           jsii.Number(float64(tr.StreamRetries())),
		MaxRecordAge:            awscdk.Duration_Seconds(jsii.Number(float64(tr.StreamMaxRecordAge()))),
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
	// The re-drive command reads this queue (docs/webhooks.md).
	awscdk.NewCfnOutput(s.Stack, jsii.String("StreamFailuresUrl"+outputName(name)), &awscdk.CfnOutputProps{
		Value:       queue.QueueUrl(),
		Description: jsii.String("On-failure queue of " + name + "'s stream mapping (cmd/a2awire-redrive -failures)"),
	})
}

// outputName is a function name as an output's logical id (letters and
// digits): webhook-dispatcher → WebhookDispatcher.
func outputName(name string) string {
	var b []byte
	up := true
	for _, c := range []byte(name) {
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
			if up && c >= 'a' && c <= 'z' {
				c -= 'a' - 'A'
			}
			b = append(b, c)
			up = false
		default:
			up = true
		}
	}
	return string(b)
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
