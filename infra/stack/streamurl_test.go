package stack_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/infra/stack"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/schema"
	"github.com/aws/aws-cdk-go/awscdk/v2"
)

// apiRoutes is the routes of p the HTTP API serves: every one but the
// streaming functions', which their function URLs serve.
func apiRoutes(p stack.Props) []routes.Route {
	streaming := map[string]bool{}
	for _, fn := range p.Functions {
		streaming[fn.Name] = fn.Streaming
	}
	var out []routes.Route
	for _, r := range p.Routes {
		if !streaming[r.Function] {
			out = append(out, r)
		}
	}
	return out
}

// checkStreamURLs: every streaming function has exactly one function URL,
// in RESPONSE_STREAM mode with auth NONE (the function checks signatures),
// anyone may invoke it through that URL, its routes are not the API's, the
// stack outputs the URL, and every function declaring an empty
// STREAM_BASE_URL (A2A_BASE_URL) gets the event stream's (the A2A
// bridge's) origin built from that URL.
// Functions that do not stream have no URL.
func checkStreamURLs(t *testing.T, s *synthesized) {
	fnByID := map[string]string{}
	for name, fn := range s.stack.Functions {
		fnByID[s.logicalID(t, fn)] = name
	}
	urlOf := map[string]string{} // function name → URL logical id
	for id, r := range s.ofType("AWS::Lambda::Url") {
		target, _ := r.Properties["TargetFunctionArn"].(map[string]any)
		getAtt, _ := target["Fn::GetAtt"].([]any)
		if len(getAtt) != 2 || getAtt[1] != "Arn" {
			t.Errorf("function URL %s: target %v is not a function of the stack", id, r.Properties["TargetFunctionArn"])
			continue
		}
		name := fnByID[fmt.Sprint(getAtt[0])]
		if _, dup := urlOf[name]; dup {
			t.Errorf("%s has two function URLs", name)
		}
		urlOf[name] = id
		if r.Properties["InvokeMode"] != "RESPONSE_STREAM" || r.Properties["AuthType"] != "NONE" {
			t.Errorf("%s's URL: InvokeMode %v AuthType %v, want RESPONSE_STREAM NONE", name, r.Properties["InvokeMode"], r.Properties["AuthType"])
		}
	}
	streaming := map[string]bool{}
	for _, fn := range s.props.Functions {
		streaming[fn.Name] = fn.Streaming
		if _, ok := urlOf[fn.Name]; ok != fn.Streaming {
			t.Errorf("%s: streaming %v but has a function URL: %v", fn.Name, fn.Streaming, ok)
		}
	}
	for name, id := range urlOf {
		fnID := s.logicalID(t, s.stack.Functions[name])
		invokable := false
		for _, r := range s.ofType("AWS::Lambda::Permission") {
			fnRef, _ := json.Marshal(r.Properties["FunctionName"])
			if r.Properties["Action"] == "lambda:InvokeFunctionUrl" && r.Properties["FunctionUrlAuthType"] == "NONE" &&
				r.Properties["Principal"] == "*" && strings.Contains(string(fnRef), fnID) {
				invokable = true
			}
		}
		if !invokable {
			t.Errorf("%s: no lambda:InvokeFunctionUrl permission for its URL %s", name, id)
		}
		found := false
		for _, o := range s.outputs {
			raw, _ := json.Marshal(o)
			found = found || strings.Contains(string(raw), id)
		}
		if !found {
			t.Errorf("%s: no output names its URL %s", name, id)
		}
	}
	for _, r := range s.ofType("AWS::ApiGatewayV2::Route") {
		for _, want := range s.props.Routes {
			if streaming[want.Function] && r.Properties["RouteKey"] == want.Key() {
				t.Errorf("route %s is the API's; %s streams through its URL", want.Key(), want.Function)
			}
		}
	}
	for env, owner := range map[string]string{stack.StreamBaseURLEnv: routes.EventStreamFunction, routes.A2ABaseURLEnv: routes.A2ABridgeFunction} {
		ownURL, has := urlOf[owner]
		for _, fn := range s.props.Functions {
			v, declared := fn.Env[env]
			if !declared || v != "" || fn.Name == owner {
				continue // the owner answers on its URL: the request's origin is it
			}
			p := s.resources[s.logicalID(t, s.stack.Functions[fn.Name])].Properties
			vars, _ := p["Environment"].(map[string]any)["Variables"].(map[string]any)
			got, _ := json.Marshal(vars[env])
			switch {
			case !has && vars[env] != nil:
				t.Errorf("%s: %s=%s with no %s function", fn.Name, env, got, owner)
			case has && (!strings.Contains(string(got), `"https://"`) || !strings.Contains(string(got), `["`+ownURL+`","FunctionUrl"]`)):
				t.Errorf("%s: %s=%s, want https:// and the host of %s's URL", fn.Name, env, got, ownURL)
			}
		}
	}
}

// TestStreamingTimeout: a function serving routes may run past API
// Gateway's 30 s only when it streams (its routes are its URL's).
func TestStreamingTimeout(t *testing.T) {
	assets := t.TempDir()
	props := func(streaming bool) stack.Props {
		fn := routes.DefaultFunction("fn-s")
		fn.TimeoutSeconds, fn.Streaming = 900, streaming
		return stack.Props{
			Stage:     "dev",
			Routes:    []routes.Route{{Method: "GET", Path: "/s", Function: "fn-s"}},
			Functions: []routes.Function{fn},
			Table:     schema.Default(),
			AssetDir:  func(string) string { return assets },
		}
	}
	if _, err := stack.New(awscdk.NewApp(nil), props(false)); err == nil || !strings.Contains(err.Error(), "timeout 900 s serves routes") {
		t.Errorf("a 900 s function behind the API: %v", err)
	}
	s, err := stack.New(awscdk.NewApp(nil), props(true))
	if err != nil {
		t.Fatalf("a 900 s streaming function: %v", err)
	}
	if _, ok := s.StreamURLs["fn-s"]; !ok {
		t.Error("the streaming function has no URL")
	}
}
