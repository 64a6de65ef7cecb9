package stack

import (
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

// Streaming functions (routes.Function.Streaming) answer as they go, which
// an HTTP API cannot carry: API Gateway buffers a whole integration
// response and ends it at 30 s. So their routes are not the API's; each
// such function gets a Lambda function URL in RESPONSE_STREAM mode, which
// passes every write of the handler (aws-lambda-go's lambdaurl) to the
// client as it is made, for up to the function's timeout. The URL's auth
// is NONE: the function checks the request's signature itself, as every
// signed route's function does behind the API.

// StreamBaseURLEnv is the variable the deploy fills with the function URL
// of routes.EventStreamFunction (no trailing slash) on every function that
// declares it with an empty value.
const StreamBaseURLEnv = routes.StreamBaseURLEnv

// streamingFunctions is the set of the streaming functions of p.
func streamingFunctions(p Props) map[string]bool {
	out := map[string]bool{}
	for _, fn := range p.Functions {
		if fn.Streaming {
			out[fn.Name] = true
		}
	}
	return out
}

// addStreamURLs gives every streaming function its function URL, then each
// URL's origin to the functions that tell clients where it is (urlEnvs).
func (s *Stack) addStreamURLs(p Props) {
	for _, fn := range p.Functions {
		if !fn.Streaming {
			continue
		}
		f := s.Functions[fn.Name]
		u := f.AddFunctionUrl(&awslambda.FunctionUrlOptions{
			AuthType:   awslambda.FunctionUrlAuthType_NONE,
			InvokeMode: awslambda.InvokeMode_RESPONSE_STREAM,
		})
		s.StreamURLs[fn.Name] = u
		awscdk.NewCfnOutput(s.Stack, jsii.String("StreamUrl"+outputName(fn.Name)), &awscdk.CfnOutputProps{
			Value:       u.Url(),
			Description: jsii.String("Function URL (RESPONSE_STREAM) of " + fn.Name + ": its routes are served here, not by the API"),
		})
	}
	for env, name := range urlEnvs {
		u, ok := s.StreamURLs[name]
		if !ok {
			continue
		}
		// The URL ends in "/"; the variable holds an origin, as
		// BASE_URL's users expect: "https://" + the URL's host.
		base := awscdk.Fn_Join(jsii.String(""), &[]*string{
			jsii.String("https://"),
			awscdk.Fn_Select(jsii.Number(2), awscdk.Fn_Split(jsii.String("/"), u.Url(), nil)),
		})
		for _, fn := range p.Functions {
			// Not the URL's own function: its URL would depend on
			// itself. It answers on that URL, so the request's origin
			// is the URL's.
			if v, ok := fn.Env[env]; ok && v == "" && fn.Name != name {
				s.Functions[fn.Name].AddEnvironment(jsii.String(env), base, nil)
			}
		}
	}
}

// urlEnvs names, for each variable the deploy fills with a function URL's
// origin, the streaming function whose URL it is.
var urlEnvs = map[string]string{
	StreamBaseURLEnv:     routes.EventStreamFunction,
	routes.A2ABaseURLEnv: routes.A2ABridgeFunction,
}
