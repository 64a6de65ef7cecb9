package stack

import (
	"encoding/json"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"
)

// Default route throttling of the API stage: every route, together with the
// others, is held to a steady ThrottleRateLimit requests per second with
// bursts of up to ThrottleBurstLimit; API Gateway answers the excess with
// 429 before any Lambda runs. The numbers are sized to the reserved
// concurrency, not to an imagined audience: the functions together may run
// len(functions) × DefaultReservedConcurrency (50 for the five fixtures) at
// once, which at the fixtures' usual 10–50 ms serves far more than 100
// requests per second, so the stage limit, not Lambda throttling, is what an
// ordinary flood meets first, while a flood of slow calls (messy's 5 s
// `slow`) meets its own function's reservation and nobody else's. Raise
// both in step with the reservations.
const (
	ThrottleRateLimit  = 100
	ThrottleBurstLimit = 200
)

// accessLogFields are the access log's JSON fields, in the order they are
// written, with the API Gateway $context variable of each. Every value is
// quoted: an unset variable renders as "-", and a bare - would not be JSON.
var accessLogFields = []struct{ name, variable string }{
	{"requestId", "$context.requestId"},
	{"extendedRequestId", "$context.extendedRequestId"},
	{"requestTime", "$context.requestTime"},
	{"requestTimeEpoch", "$context.requestTimeEpoch"},
	{"sourceIp", "$context.identity.sourceIp"},
	{"userAgent", "$context.identity.userAgent"},
	{"httpMethod", "$context.httpMethod"},
	{"path", "$context.path"},
	{"protocol", "$context.protocol"},
	{"routeKey", "$context.routeKey"},
	{"status", "$context.status"},
	{"responseLength", "$context.responseLength"},
	{"responseLatency", "$context.responseLatency"},
	{"integrationStatus", "$context.integrationStatus"},
	{"integrationLatency", "$context.integrationLatency"},
	{"integrationRequestId", "$context.integration.requestId"},
	{"integrationError", "$context.integration.error"},
	{"integrationErrorMessage", "$context.integrationErrorMessage"},
	{"errorMessage", "$context.error.message"},
	{"errorResponseType", "$context.error.responseType"},
}

// AccessLogFormat is the stage's access log line: one JSON object per
// request. integrationRequestId is the Lambda request id, which the
// functions' own JSON log lines carry, so a gateway line leads to the
// function's lines.
func AccessLogFormat() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range accessLogFields {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(f.name)
		value, _ := json.Marshal(f.variable)
		b.Write(name)
		b.WriteByte(':')
		b.Write(value)
	}
	b.WriteByte('}')
	return b.String()
}

// addAPI creates the HTTP API and its $default stage (auto-deployed, with
// default route throttling and JSON access logs to a log group of its own).
func (s *Stack) addAPI(prod bool) {
	s.API = awsapigatewayv2.NewHttpApi(s.Stack, jsii.String("Api"), &awsapigatewayv2.HttpApiProps{
		ApiName:     jsii.String(Name(s.Stage)),
		Description: jsii.String("a2awire " + s.Stage + ": every route of shared/routes"),
		// The stage is made below: the API's own default stage takes no
		// throttling or access log settings.
		CreateDefaultStage: jsii.Bool(false),
	})
	days, removal := retention(prod)
	s.AccessLog = awslogs.NewLogGroup(s.Stack, jsii.String("ApiAccessLogs"), &awslogs.LogGroupProps{
		Retention:     days,
		RemovalPolicy: removal,
	})
	s.APIStage = awsapigatewayv2.NewHttpStage(s.Stack, jsii.String("ApiStage"), &awsapigatewayv2.HttpStageProps{
		HttpApi:    s.API,
		StageName:  jsii.String("$default"),
		AutoDeploy: jsii.Bool(true),
		Throttle: &awsapigatewayv2.ThrottleSettings{
			RateLimit:  jsii.Number(ThrottleRateLimit),
			BurstLimit: jsii.Number(ThrottleBurstLimit),
		},
		AccessLogSettings: &accessLogSettings{
			destination: awsapigatewayv2.NewLogGroupLogDestination(s.AccessLog),
			format:      awsapigateway.AccessLogFormat_Custom(jsii.String(AccessLogFormat())),
		},
	})
}

// accessLogSettings is the stage's awsapigatewayv2.IAccessLogSettings (an
// interface with no constructor in the CDK).
type accessLogSettings struct {
	destination awsapigatewayv2.IAccessLogDestination
	format      awsapigateway.AccessLogFormat
}

// Destination is where the access log goes.
func (a *accessLogSettings) Destination() awsapigatewayv2.IAccessLogDestination {
	return a.destination
}

// Format is the access log line.
func (a *accessLogSettings) Format() awsapigateway.AccessLogFormat { return a.format }
