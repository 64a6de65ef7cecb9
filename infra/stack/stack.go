// Package stack builds the a2awire CloudFormation stack from the route table.
//
// Nothing here names a function or a route: the stack is computed from its
// inputs (the routes, the function settings, the table schema and where each
// function's built binary lives), so a function folder or route added to the
// root module is deployed without an edit to infra/, and tests can add
// functions and routes of their own to exercise wiring (stream and schedule
// triggers) that no real function uses yet.
package stack

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/schema"
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// ProdStage is the stage whose data must survive a mistaken `cdk destroy`.
const ProdStage = "prod"

// TableNameEnv is the environment variable that tells a function which table
// to use. The deploy sets it on every function that touches the table and on
// no other, so a function that should not touch the table cannot find it.
const TableNameEnv = "TABLE_NAME"

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

// Stream trigger settings. The webhook dispatcher retries deliveries itself
// (design §8: backoff, then dead-letter, driven by the schedule), so the
// event source mapping only has to survive a crashing batch: bisect to find
// the poison record, retry a few times, and park what still fails in an SQS
// queue rather than blocking the shard for the stream's 24 h retention. No
// batching window: Lambda hands records over as soon as it polls them, so
// webhook delivery waits for nothing but the stream itself.
const (
	StreamBatchSize      = 100
	StreamRetryAttempts  = 5
	StreamMaxRecordAgeS  = 3600
	FailureRetentionDays = 14
)

// Props are the inputs the stack is computed from.
type Props struct {
	awscdk.StackProps
	// Stage names the deployment ("dev", "prod", ...); it is part of every
	// name the stack gives and switches the data-retention policies.
	Stage string
	// Routes are the HTTP routes, usually routes.All().
	Routes []routes.Route
	// Functions are the Lambda functions with their settings, one per
	// functions/* folder, usually routes.Config(folder) for each.
	Functions []routes.Function
	// Table is the DynamoDB table definition, usually schema.Default().
	Table schema.Table
	// AssetDir returns the directory holding a function's built `bootstrap`.
	AssetDir func(name string) string
}

// Stack is the synthesized stack with handles on what tests need to find in
// the template.
type Stack struct {
	awscdk.Stack
	Stage     string
	Table     awsdynamodb.Table
	API       awsapigatewayv2.HttpApi
	Functions map[string]awslambda.Function
	Roles     map[string]awsiam.Role
	// FailureQueues holds the on-failure queue of each stream-triggered function.
	FailureQueues map[string]awssqs.Queue
}

// Name is the CloudFormation stack name of a stage.
func Name(stage string) string { return "a2awire-" + stage }

// New adds the stack for props to scope. It checks the inputs first and
// returns an error, creating nothing, when they are inconsistent.
func New(scope constructs.Construct, props Props) (*Stack, error) {
	if err := validate(props); err != nil {
		return nil, err
	}
	sp := props.StackProps
	if sp.StackName == nil {
		sp.StackName = jsii.String(Name(props.Stage))
	}
	if sp.Description == nil {
		sp.Description = jsii.String(fmt.Sprintf("a2awire (%s): HTTP API, one Lambda per function, one DynamoDB table", props.Stage))
	}
	st := awscdk.NewStack(scope, jsii.String(Name(props.Stage)), &sp)
	awscdk.Tags_Of(st).Add(jsii.String("project"), jsii.String("a2awire"), nil)
	awscdk.Tags_Of(st).Add(jsii.String("stage"), jsii.String(props.Stage), nil)

	s := &Stack{
		Stack:         st,
		Stage:         props.Stage,
		Functions:     map[string]awslambda.Function{},
		Roles:         map[string]awsiam.Role{},
		FailureQueues: map[string]awssqs.Queue{},
	}
	prod := props.Stage == ProdStage
	s.Table = newTable(st, props.Table, prod)
	s.API = awsapigatewayv2.NewHttpApi(st, jsii.String("Api"), &awsapigatewayv2.HttpApiProps{
		ApiName:            jsii.String(Name(props.Stage)),
		Description:        jsii.String("a2awire " + props.Stage + ": every route of shared/routes"),
		CreateDefaultStage: jsii.Bool(true),
	})

	access := accessByFunction(props)
	for _, fn := range props.Functions {
		s.addFunction(fn, access[fn.Name], props.AssetDir(fn.Name), prod)
	}
	integrations := map[string]awsapigatewayv2integrations.HttpLambdaIntegration{}
	for _, r := range props.Routes {
		in, ok := integrations[r.Function]
		if !ok {
			// One integration per function, shared by its routes: API Gateway
			// then holds one AWS::ApiGatewayV2::Integration per function, and
			// each route still gets its own invoke permission scoped to its path.
			in = awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String(r.Function), s.Functions[r.Function],
				&awsapigatewayv2integrations.HttpLambdaIntegrationProps{
					PayloadFormatVersion: awsapigatewayv2.PayloadFormatVersion_VERSION_2_0(),
				})
			integrations[r.Function] = in
		}
		awsapigatewayv2.NewHttpRoute(s.API, jsii.String(r.Key()), &awsapigatewayv2.HttpRouteProps{
			HttpApi:     s.API,
			RouteKey:    awsapigatewayv2.HttpRouteKey_With(jsii.String(r.Path), httpMethods[r.Method]),
			Integration: in,
		})
	}

	awscdk.NewCfnOutput(st, jsii.String("ApiUrl"), &awscdk.CfnOutputProps{
		Value:       s.API.Url(),
		Description: jsii.String("Base URL of the HTTP API, e.g. <ApiUrl>agents/a2awire-punctual/invoke"),
	})
	awscdk.NewCfnOutput(st, jsii.String("TableName"), &awscdk.CfnOutputProps{
		Value:       s.Table.TableName(),
		Description: jsii.String("The DynamoDB table every function shares"),
	})
	return s, nil
}

// newTable builds the table from the schema the store adapters use, so the
// keys, index and TTL attribute cannot differ between the code and the cloud.
func newTable(scope constructs.Construct, t schema.Table, prod bool) awsdynamodb.Table {
	removal := awscdk.RemovalPolicy_DESTROY
	if prod {
		removal = awscdk.RemovalPolicy_RETAIN
	}
	props := &awsdynamodb.TableProps{
		PartitionKey: attribute(t.PartitionKey),
		SortKey:      attribute(t.SortKey),
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(prod),
		RemovalPolicy:      removal,
	}
	if t.TTLAttribute != "" {
		props.TimeToLiveAttribute = jsii.String(t.TTLAttribute)
	}
	if t.StreamView != "" {
		props.Stream = awsdynamodb.StreamViewType(t.StreamView)
	}
	table := awsdynamodb.NewTable(scope, jsii.String("Table"), props)
	for _, idx := range t.Indexes {
		table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
			IndexName:      jsii.String(idx.Name),
			PartitionKey:   attribute(idx.PartitionKey),
			SortKey:        attribute(idx.SortKey),
			ProjectionType: awsdynamodb.ProjectionType_ALL,
		})
	}
	return table
}

func attribute(a schema.Attr) *awsdynamodb.Attribute {
	if a.Name == "" {
		return nil
	}
	return &awsdynamodb.Attribute{Name: jsii.String(a.Name), Type: attributeTypes[a.Type]}
}

// addFunction creates one function with its own role, log group and
// triggers, all under a construct named after the function so that the
// template's logical ids say which function a resource belongs to.
func (s *Stack) addFunction(fn routes.Function, access routes.Access, assetDir string, prod bool) {
	scope := constructs.NewConstruct(s.Stack, jsii.String(fn.Name))

	retention, logRemoval := awslogs.RetentionDays_ONE_MONTH, awscdk.RemovalPolicy_DESTROY
	if prod {
		retention, logRemoval = awslogs.RetentionDays_THREE_MONTHS, awscdk.RemovalPolicy_RETAIN
	}
	logs := awslogs.NewLogGroup(scope, jsii.String("Logs"), &awslogs.LogGroupProps{
		Retention:     retention,
		RemovalPolicy: logRemoval,
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
		env[k] = jsii.String(v)
	}
	if access > routes.NoTable {
		env[TableNameEnv] = s.Table.TableName()
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
	})
	s.Functions[fn.Name] = f
	s.Roles[fn.Name] = role

	tableAndIndexes := []*string{s.Table.TableArn(), jsii.String(*s.Table.TableArn() + "/index/*")}
	switch access {
	case routes.ReadOnly:
		role.AddToPolicy(allow(readActions, tableAndIndexes))
	case routes.ReadWrite:
		role.AddToPolicy(allow(append(slices.Clone(readActions), writeActions...), tableAndIndexes))
	}

	for _, tr := range fn.Triggers {
		switch tr.Kind {
		case routes.StreamTrigger:
			s.addStreamTrigger(scope, fn.Name, f, role, prod)
		case routes.ScheduleTrigger:
			s.addSchedule(scope, fn.Name, tr.Schedule, f)
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
	f.AddPermission(jsii.String("ScheduleInvoke"), &awslambda.Permission{
		Principal: awsiam.NewServicePrincipal(jsii.String("events.amazonaws.com"), nil),
		Action:    jsii.String("lambda:InvokeFunction"),
		SourceArn: rule.AttrArn(),
	})
}

// addStreamTrigger feeds the function from the table's stream. It uses a
// plain EventSourceMapping rather than DynamoEventSource because the latter
// grants dynamodb:ListStreams on Resource "*".
func (s *Stack) addStreamTrigger(scope constructs.Construct, name string, f awslambda.Function, role awsiam.Role, prod bool) {
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
	s.FailureQueues[name] = queue
	// The grant goes into the role's default policy, which the function
	// depends on, so the mapping (which depends on the function) is created
	// only once Lambda may read the stream.
	role.AddToPolicy(allow(streamActions, []*string{jsii.String(*s.Table.TableArn() + "/stream/*")}))
	awslambda.NewEventSourceMapping(scope, jsii.String("TableStream"), &awslambda.EventSourceMappingProps{
		Target:                  f,
		EventSourceArn:          s.Table.TableStreamArn(),
		StartingPosition:        awslambda.StartingPosition_LATEST,
		BatchSize:               jsii.Number(StreamBatchSize),
		BisectBatchOnError:      jsii.Bool(true),
		RetryAttempts:           jsii.Number(StreamRetryAttempts),
		MaxRecordAge:            awscdk.Duration_Seconds(jsii.Number(StreamMaxRecordAgeS)),
		ReportBatchItemFailures: jsii.Bool(true),
		OnFailure:               awslambdaeventsources.NewSqsDlq(queue),
	})
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

var attributeTypes = map[schema.AttrType]awsdynamodb.AttributeType{
	schema.String: awsdynamodb.AttributeType_STRING,
	schema.Number: awsdynamodb.AttributeType_NUMBER,
}

var streamViews = []string{"NEW_AND_OLD_IMAGES", "NEW_IMAGE", "OLD_IMAGE", "KEYS_ONLY"}

var (
	stageRE    = regexp.MustCompile(`^[a-z][a-z0-9-]{0,19}$`)
	functionRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,47}$`)
)

// validate rejects inputs that CloudFormation would reject late (after
// minutes of deploying) or that would deploy something other than intended.
func validate(p Props) error {
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }

	if !stageRE.MatchString(p.Stage) {
		fail("stage %q: want lower-case letters, digits and '-', starting with a letter, at most 20 characters", p.Stage)
	}
	if p.AssetDir == nil {
		fail("AssetDir is nil")
	}
	if err := validateTable(p.Table); err != nil {
		fail("%v", err)
	}
	fns := map[string]routes.Function{}
	for _, fn := range p.Functions {
		if !functionRE.MatchString(fn.Name) {
			fail("function %q: want lower-case letters, digits and '-', at most 48 characters", fn.Name)
		}
		if _, dup := fns[fn.Name]; dup {
			fail("function %q listed twice", fn.Name)
		}
		fns[fn.Name] = fn
		if fn.MemoryMB < 128 || fn.MemoryMB > 10240 {
			fail("function %q: memory %d MB outside 128..10240", fn.Name, fn.MemoryMB)
		}
		if fn.TimeoutSeconds < 1 || fn.TimeoutSeconds > 900 {
			fail("function %q: timeout %d s outside 1..900", fn.Name, fn.TimeoutSeconds)
		}
		if _, ok := fn.Env[TableNameEnv]; ok {
			fail("function %q: env %s is set by the deploy", fn.Name, TableNameEnv)
		}
		streams, schedules := 0, 0
		for _, tr := range fn.Triggers {
			switch tr.Kind {
			case routes.StreamTrigger:
				streams++
				if p.Table.StreamView == "" {
					fail("function %q: stream trigger but the table has no stream", fn.Name)
				}
			case routes.ScheduleTrigger:
				schedules++
				if !strings.HasPrefix(tr.Schedule, "rate(") && !strings.HasPrefix(tr.Schedule, "cron(") {
					fail("function %q: schedule %q is not a rate(...) or cron(...) expression", fn.Name, tr.Schedule)
				}
			default:
				fail("function %q: unknown trigger kind %q", fn.Name, tr.Kind)
			}
		}
		if streams > 1 || schedules > 1 {
			fail("function %q: at most one stream and one schedule trigger", fn.Name)
		}
	}
	seen := map[string]string{}
	for _, r := range p.Routes {
		if _, ok := httpMethods[r.Method]; !ok {
			fail("route %q: method %q is not one of %v", r.Key(), r.Method, slices.Sorted(maps.Keys(httpMethods)))
		}
		if !strings.HasPrefix(r.Path, "/") {
			fail("route %q: path must start with '/'", r.Key())
		}
		if _, ok := fns[r.Function]; !ok {
			fail("route %q: function %q has no functions/%s folder", r.Key(), r.Function, r.Function)
		}
		// API Gateway treats /a/{x} and /a/{y} as the same route.
		shape := r.Method + " " + routes.Shape(r.Path)
		if prev, dup := seen[shape]; dup {
			fail("route %q: same API Gateway route as %q", r.Key(), prev)
		}
		seen[shape] = r.Key()
	}
	if len(errs) > 0 {
		return fmt.Errorf("stack inputs: %s", strings.Join(errs, "; "))
	}
	return nil
}

func validateTable(t schema.Table) error {
	for _, a := range []schema.Attr{t.PartitionKey, t.SortKey} {
		if a.Name != "" {
			if _, ok := attributeTypes[a.Type]; !ok {
				return fmt.Errorf("table key %q: unsupported type %q", a.Name, a.Type)
			}
		}
	}
	if t.PartitionKey.Name == "" {
		return fmt.Errorf("table: no partition key")
	}
	for _, idx := range t.Indexes {
		if idx.Name == "" || idx.PartitionKey.Name == "" {
			return fmt.Errorf("table index %q: needs a name and a partition key", idx.Name)
		}
		for _, a := range []schema.Attr{idx.PartitionKey, idx.SortKey} {
			if _, ok := attributeTypes[a.Type]; a.Name != "" && !ok {
				return fmt.Errorf("index %s key %q: unsupported type %q", idx.Name, a.Name, a.Type)
			}
		}
	}
	if t.StreamView != "" && !slices.Contains(streamViews, t.StreamView) {
		return fmt.Errorf("table: stream view %q is not one of %v", t.StreamView, streamViews)
	}
	return nil
}
