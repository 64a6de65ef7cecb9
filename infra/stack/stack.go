// Package stack builds the a2awire CloudFormation stack from the route table.
//
// Nothing here names a function or a route: the stack is computed from its
// inputs (the routes, the function settings, the table schema and where each
// function's built binary lives), so a function folder or route added to the
// root module is deployed without an edit to infra/, and tests can add
// functions and routes of their own to exercise wiring (stream and schedule
// triggers) that no real function uses yet.
//
// The stack is production-shaped and deploys on a new account: the HTTP
// API stage throttles each route by default and writes JSON access logs,
// functions log in Lambda's JSON format and reserve concurrency only when
// the deploy asks (a reservation by default would fail on a new account's
// low quota), CloudWatch alarms watch every signal of loss and notify one
// SNS topic, and Nag applies cdk-nag's AwsSolutions and Serverless packs,
// each finding this design accepts suppressed with its reason next to the
// resource it concerns.
package stack

import (
	"fmt"

	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/schema"
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
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
	// ReservedConcurrency reserves concurrency for the functions of a
	// class (FunctionClass) or for one function by name, the name winning
	// (cdk.json or `-c reservedConcurrency=...`; see main.go). Empty: no
	// function reserves any.
	ReservedConcurrency map[string]int
	// AccountConcurrency is the Lambda concurrency quota of the target
	// account and region; 0 means DefaultAccountConcurrency. The
	// reservations must leave MinUnreservedConcurrency of it unreserved.
	AccountConcurrency int
	// NetworkPublicKey is the network's Ed25519 public key, std base64
	// (context networkPublicKey): the value of NetworkPublicKeyEnv on the
	// functions that declare it, and the fixtures' owner. Empty: none.
	NetworkPublicKey string
	// NetworkSigningKeySecret names the Secrets Manager secret (name or ARN)
	// whose SecretString is the network's private signing key (the std
	// base64 of its 32-byte Ed25519 seed; context networkSigningKeySecret),
	// optionally followed by ":SecretString:<json-key>" for a secret stored
	// as key/value (SigningKeyReference).
	// Functions that declare NetworkSigningKeyEnv (the webhook deliverer,
	// the retry function, world-ping; the registry, which only derives its
	// cursor key from it) get it through a CloudFormation dynamic
	// reference, resolved at deploy, so the key is in no template, asset or
	// source file; so does the seed function, whose registration checks it
	// (seed.CheckSigningKey) and fails the deploy on a bad one. Empty:
	// deliveries carry v1 only, and the registry keys its cursors per
	// instance.
	NetworkSigningKeySecret string
	// CorsOrigins are the browser origins allowed to call the API (context
	// corsOrigins); empty: no CORS.
	CorsOrigins []string
	// DomainName and CertificateArn serve the API at https://<DomainName>/
	// with an ACM certificate of the stack's region (context domainName,
	// certificateArn): the fixtures are registered and Agent Cards name
	// that URL. Empty: the execute-api URL.
	DomainName     string
	CertificateArn string
	// AlarmEmail subscribes an address to the alarm topic (context
	// alarmEmail); empty: the topic has no subscription.
	AlarmEmail string
	// Seed, when set, registers the fixtures at deploy (see Seeding).
	Seed *Seeding
	// Queues is the queue table; nil means routes.Queues().
	Queues []routes.Queue
}

// Stack is the synthesized stack with handles on what tests need to find in
// the template.
type Stack struct {
	awscdk.Stack
	Stage     string
	Table     awsdynamodb.Table
	API       awsapigatewayv2.HttpApi
	APIStage  awsapigatewayv2.HttpStage
	AccessLog awslogs.LogGroup
	Functions map[string]awslambda.Function
	Roles     map[string]awsiam.Role
	// FailureQueues holds the on-failure queue of each stream-triggered function.
	FailureQueues map[string]awssqs.Queue
	// Queues holds the queue table's queues by name.
	Queues map[string]awssqs.Queue
	// Reserved is the reserved concurrency each function was given.
	Reserved map[string]int
	// Seeding is the fixtures' registration (nil without Props.Seed).
	Seeding awscdk.CustomResource
	// AlarmTopic receives every alarm's notifications; Alarms are by id
	// ("<function>-Errors", "TableThrottles", ...).
	AlarmTopic awssns.Topic
	Alarms     map[string]awscloudwatch.Alarm
	Dashboard  awscloudwatch.Dashboard

	// publicURL is the network's base URL: the custom domain's, else the
	// stage's.
	publicURL *string
	// StreamURLs holds the function URL of each streaming function.
	StreamURLs map[string]awslambda.FunctionUrl

	networkKey string
	// signingSecret is Props.NetworkSigningKeySecret.
	signingSecret string
	seedFunction  string
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
	// Not on the dashboard: the CDK renders Tags on AWS::CloudWatch::Dashboard
	// but CloudFormation's resource schema (which cfn-lint checks) has none.
	untagged := &awscdk.TagProps{ExcludeResourceTypes: jsii.Strings("AWS::CloudWatch::Dashboard")}
	awscdk.Tags_Of(st).Add(jsii.String("project"), jsii.String("a2awire"), untagged)
	awscdk.Tags_Of(st).Add(jsii.String("stage"), jsii.String(props.Stage), untagged)

	s := &Stack{
		Stack:         st,
		Stage:         props.Stage,
		Functions:     map[string]awslambda.Function{},
		Roles:         map[string]awsiam.Role{},
		FailureQueues: map[string]awssqs.Queue{},
		Queues:        map[string]awssqs.Queue{},
		Reserved:      reservations(props),
		StreamURLs:    map[string]awslambda.FunctionUrl{},
		networkKey:    props.NetworkPublicKey,
		signingSecret: props.NetworkSigningKeySecret,
	}
	if props.Seed != nil {
		s.seedFunction = props.Seed.Function
	}
	prod := props.Stage == ProdStage
	s.Table = newTable(st, props.Table, prod)
	s.addAPI(props, prod)
	s.addQueues(queueTable(props), prod)

	access := accessByFunction(props)
	for _, fn := range props.Functions {
		s.addFunction(fn, access[fn.Name], props.Table, props.AssetDir(fn.Name), prod)
	}
	s.addStreamURLs(props)
	streaming := streamingFunctions(props)
	integrations := map[string]awsapigatewayv2integrations.HttpLambdaIntegration{}
	for _, r := range props.Routes {
		if streaming[r.Function] {
			continue // served by the function's URL (streamurl.go)
		}
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
		route := awsapigatewayv2.NewHttpRoute(s.API, jsii.String(r.Key()), &awsapigatewayv2.HttpRouteProps{
			HttpApi:     s.API,
			RouteKey:    awsapigatewayv2.HttpRouteKey_With(jsii.String(r.Path), httpMethods[r.Method]),
			Integration: in,
		})
		suppress(route, nagRouteAuth)
	}

	if props.Seed != nil {
		s.Seeding = s.addSeeding(*props.Seed, props.NetworkPublicKey)
	}
	s.addMonitoring(props)

	awscdk.NewCfnOutput(st, jsii.String("ApiUrl"), &awscdk.CfnOutputProps{
		Value:       s.APIStage.Url(),
		Description: jsii.String("Base URL of the HTTP API, e.g. <ApiUrl>agents/a2awire-punctual/invoke"),
	})
	awscdk.NewCfnOutput(st, jsii.String("PublicUrl"), &awscdk.CfnOutputProps{
		Value:       s.publicURL,
		Description: jsii.String("The network's URL: the custom domain's when one is set, else ApiUrl (make cloud-check URL=<PublicUrl>)"),
	})
	awscdk.NewCfnOutput(st, jsii.String("TableName"), &awscdk.CfnOutputProps{
		Value:       s.Table.TableName(),
		Description: jsii.String("The DynamoDB table every function shares"),
	})
	return s, nil
}

// retention is how long logs are kept and what happens to them when the
// stack is deleted: a month and gone in a disposable stage, three months and
// kept in prod.
func retention(prod bool) (awslogs.RetentionDays, awscdk.RemovalPolicy) {
	if prod {
		return awslogs.RetentionDays_THREE_MONTHS, awscdk.RemovalPolicy_RETAIN
	}
	return awslogs.RetentionDays_ONE_MONTH, awscdk.RemovalPolicy_DESTROY
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

var attributeTypes = map[schema.AttrType]awsdynamodb.AttributeType{
	schema.String: awsdynamodb.AttributeType_STRING,
	schema.Number: awsdynamodb.AttributeType_NUMBER,
}
