package stack

import (
	"encoding/json"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"
)

// Default route throttling of the API stage. API Gateway applies a
// stage's default route settings to each route separately: every route may
// take a steady ThrottleRateLimit requests per second with bursts of up to
// ThrottleBurstLimit, and answers the excess with 429 before any Lambda
// runs. It is not a limit for all routes together: with the checkout's 40
// routes the stage may pass up to 40 × 100 requests per second, bounded
// only by the account's API Gateway quota (10,000 per second per region)
// and, behind it, by Lambda's concurrency (the account quota, and any
// reservation; see reservations). A flood on one route meets its own
// route's limit and leaves the other routes theirs.
const (
	ThrottleRateLimit  = 100
	ThrottleBurstLimit = 200
)

// CORS of the HTTP API, when Props.CorsOrigins names the browser origins
// that may call it: API Gateway then answers preflight requests itself and
// adds the CORS headers to every response. The headers a signed request
// carries (HTTP Message Signatures) are allowed, and the ones a client
// reads from an answer exposed.
var (
	corsAllowHeaders  = []string{"Content-Type", "Signature", "Signature-Input", "Signature-Agent", "Content-Digest", "If-None-Match"}
	corsExposeHeaders = []string{"Retry-After", "ETag", "Location", "Allow"}
)

// CorsMaxAgeS is how long a browser may cache a preflight answer.
const CorsMaxAgeS = 600

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
// default route throttling and JSON access logs to a log group of its own),
// with CORS and a custom domain when props ask for them.
func (s *Stack) addAPI(p Props, prod bool) {
	apiProps := &awsapigatewayv2.HttpApiProps{
		ApiName:     jsii.String(Name(s.Stage)),
		Description: jsii.String("a2awire " + s.Stage + ": every route of shared/routes"),
		// The stage is made below: the API's own default stage takes no
		// throttling or access log settings.
		CreateDefaultStage: jsii.Bool(false),
	}
	if len(p.CorsOrigins) > 0 {
		apiProps.CorsPreflight = &awsapigatewayv2.CorsPreflightOptions{
			AllowOrigins:  jsii.Strings(p.CorsOrigins...),
			AllowMethods:  &[]awsapigatewayv2.CorsHttpMethod{awsapigatewayv2.CorsHttpMethod_ANY},
			AllowHeaders:  jsii.Strings(corsAllowHeaders...),
			ExposeHeaders: jsii.Strings(corsExposeHeaders...),
			MaxAge:        awscdk.Duration_Seconds(jsii.Number(CorsMaxAgeS)),
		}
	}
	s.API = awsapigatewayv2.NewHttpApi(s.Stack, jsii.String("Api"), apiProps)
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
			destination: &logGroupDestination{group: s.AccessLog},
			format:      awsapigateway.AccessLogFormat_Custom(jsii.String(AccessLogFormat())),
		},
	})
	s.publicURL = s.APIStage.Url()
	if p.DomainName != "" {
		s.addDomain(p.DomainName, p.CertificateArn)
	}
}

// addDomain serves the stage at https://<domain>/ with the ACM certificate
// (of the stack's region) certificateArn, written at the CloudFormation
// level so that no certificate-manager module is compiled in for one ARN.
// DNS stays the operator's: the DomainTarget output is the name the
// domain's CNAME (or alias) record must point to.
func (s *Stack) addDomain(domain, certificateArn string) {
	dn := awsapigatewayv2.NewCfnDomainName(s.Stack, jsii.String("Domain"), &awsapigatewayv2.CfnDomainNameProps{
		DomainName: jsii.String(domain),
		DomainNameConfigurations: &[]any{&awsapigatewayv2.CfnDomainName_DomainNameConfigurationProperty{
			CertificateArn: jsii.String(certificateArn),
			EndpointType:   jsii.String("REGIONAL"),
			SecurityPolicy: jsii.String("TLS_1_2"),
		}},
	})
	mapping := awsapigatewayv2.NewCfnApiMapping(s.Stack, jsii.String("DomainMapping"), &awsapigatewayv2.CfnApiMappingProps{
		ApiId:      s.API.ApiId(),
		DomainName: dn.Ref(),
		Stage:      jsii.String("$default"),
	})
	mapping.Node().AddDependency(s.APIStage)
	s.publicURL = jsii.String("https://" + domain + "/")
	awscdk.NewCfnOutput(s.Stack, jsii.String("DomainTarget"), &awscdk.CfnOutputProps{
		Value:       dn.AttrRegionalDomainName(),
		Description: jsii.String("Point " + domain + "'s DNS record (CNAME or alias) here"),
	})
}

// logGroupDestination is the access log's destination: the log group's
// ARN without the ":*" the CDK's LogGroupLogDestination appends (the ARN
// of the group's streams, which API Gateway stores without the suffix, so
// every deploy showed drift).
type logGroupDestination struct{ group awslogs.LogGroup }

// Bind returns the log group's ARN as API Gateway stores it.
func (d *logGroupDestination) Bind(awsapigatewayv2.IStage) *awsapigatewayv2.AccessLogDestinationConfig {
	st := awscdk.Stack_Of(d.group)
	arn := st.FormatArn(&awscdk.ArnComponents{
		Service:      jsii.String("logs"),
		Resource:     jsii.String("log-group"),
		ResourceName: d.group.LogGroupName(),
		ArnFormat:    awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
	return &awsapigatewayv2.AccessLogDestinationConfig{DestinationArn: arn}
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
