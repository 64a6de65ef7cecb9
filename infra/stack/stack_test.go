package stack_test

import (
	"archive/tar"
	"compress/gzip"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/infra/internal/repo"
	"github.com/a2awire/a2awire/infra/stack"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/schema"
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// TestMain closes the jsii runtime (a node child process) once every test
// has run. The tests never call t.Parallel: the jsii runtime is not safe
// for concurrent use.
func TestMain(m *testing.M) {
	// What the Makefile exports, so that a bare `go test` is as quiet and
	// offline as `make test-infra`.
	os.Setenv("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
	os.Setenv("CDK_DISABLE_CLI_TELEMETRY", "true")
	code := m.Run()
	jsii.Close()
	os.Exit(code)
}

// synthesized is one synthesized stack: the assertions template for
// pattern checks and its JSON as plain Go values for whole-template scans,
// the cdk-nag annotations and report rows. Synthesizing costs seconds, so
// each test builds one and runs every check against it.
type synthesized struct {
	stack       *stack.Stack
	props       stack.Props
	template    assertions.Template
	annotations assertions.Annotations
	resources   map[string]resource
	outputs     map[string]any
	// paths maps each resource's construct path (what cdk-nag reports) to
	// its logical id.
	paths map[string]string
	// nag holds the distinct rows of the AwsSolutions and Serverless reports.
	nag []nagRow
}

type resource struct {
	Type           string         `json:"Type"`
	Properties     map[string]any `json:"Properties"`
	DeletionPolicy string         `json:"DeletionPolicy"`
	UpdateReplace  string         `json:"UpdateReplacePolicy"`
	Metadata       map[string]any `json:"Metadata"`
}

// nagRow is one line of a cdk-nag report: a rule applied to a resource.
type nagRow struct {
	Rule, Resource, Compliance, Reason, Level string
}

// synth builds props into a fresh app configured as `cdk synth` configures
// it: cdk.json's context (the feature flags) and cdk-nag's packs with
// reports. Asset directories are temporary folders holding a dummy
// bootstrap, so the tests need no `make build`.
func synth(t *testing.T, props stack.Props) *synthesized {
	t.Helper()
	assets := t.TempDir()
	for _, fn := range props.Functions {
		dir := filepath.Join(assets, fn.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "bootstrap"), []byte("#!/bin/sh\n# "+fn.Name+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	props.AssetDir = func(name string) string { return filepath.Join(assets, name) }
	out := t.TempDir()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(out), Context: cdkContext(t)})
	stack.Nag(app, true)
	s, err := stack.New(app, props)
	if err != nil {
		t.Fatalf("stack.New: %v", err)
	}
	tmpl := synthesize(t, s.Stack)
	raw, err := json.Marshal(tmpl.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Resources map[string]resource `json:"Resources"`
		Outputs   map[string]any      `json:"Outputs"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, r := range doc.Resources {
		counts[r.Type]++
	}
	t.Logf("%s: %d resources %v", *s.StackName(), len(doc.Resources), counts)
	paths := map[string]string{}
	for _, c := range *s.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		if el, ok := c.(awscdk.CfnElement); ok {
			if id, ok := s.Resolve(el.LogicalId()).(string); ok {
				paths[*c.Node().Path()] = id
			}
		}
	}
	return &synthesized{
		stack: s, props: props, template: tmpl, annotations: assertions.Annotations_FromStack(s.Stack),
		resources: doc.Resources, outputs: doc.Outputs, paths: paths, nag: nagReports(t, out, *s.StackName()),
	}
}

// synthesize runs the synthesis, where cdk-nag and the CDK's own template
// validation run; an error there (printed above by the CDK) fails the test
// instead of panicking through the whole test binary.
func synthesize(t *testing.T, st awscdk.Stack) (tmpl assertions.Template) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("synthesis failed (cdk-nag findings are printed above): %v", r)
		}
	}()
	return assertions.Template_FromStack(st, nil)
}

// cdkContext is the context of infra/cdk.json, which `cdk synth` hands the
// app: the feature flags change the template, so the tests use them too.
func cdkContext(t *testing.T) *map[string]any {
	t.Helper()
	root, err := repo.Root(".")
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := repo.CDKContext(root)
	if err != nil {
		t.Fatal(err)
	}
	return &ctx
}

// nagReports reads the distinct rows of the packs' CSV reports in the cloud
// assembly directory. A pack appends to its report on every synthesis of
// the app, hence the dedup.
func nagReports(t *testing.T, dir, stackName string) []nagRow {
	t.Helper()
	var rows []nagRow
	seen := map[nagRow]bool{}
	for _, pack := range []string{"AwsSolutions", "Serverless"} {
		f, err := os.Open(filepath.Join(dir, pack+"--"+stackName+"-NagReport.csv"))
		if err != nil {
			t.Fatalf("cdk-nag %s report: %v", pack, err)
		}
		recs, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil {
			t.Fatalf("cdk-nag %s report: %v", pack, err)
		}
		if len(recs) < 2 {
			t.Fatalf("cdk-nag %s report has no rows", pack)
		}
		for _, r := range recs[1:] {
			if len(r) < 5 {
				t.Fatalf("cdk-nag %s report row %v", pack, r)
			}
			row := nagRow{Rule: r[0], Resource: r[1], Compliance: r[2], Reason: r[3], Level: r[4]}
			if !seen[row] {
				seen[row] = true
				rows = append(rows, row)
			}
		}
	}
	return rows
}

// checkAssertion runs an assertions call, which reports a mismatch by
// panicking with the jsii error, and turns the panic into a test failure.
func checkAssertion(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	f()
}

// checkoutProps are the inputs main.go computes for this checkout.
func checkoutProps(t *testing.T, stage string) stack.Props {
	t.Helper()
	root, err := repo.Root(".")
	if err != nil {
		t.Fatal(err)
	}
	folders, err := repo.Functions(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(folders) == 0 {
		t.Fatalf("no folders under %s/functions", root)
	}
	rs, fns, err := stack.Inputs(folders)
	if err != nil {
		t.Fatal(err)
	}
	return stack.Props{Stage: stage, Routes: rs, Functions: fns, Table: schema.Default()}
}

func (s *synthesized) ofType(typ string) map[string]resource {
	out := map[string]resource{}
	for id, r := range s.resources {
		if r.Type == typ {
			out[id] = r
		}
	}
	return out
}

// logicalID resolves the logical id CloudFormation knows a construct by.
func (s *synthesized) logicalID(t *testing.T, c constructs.IConstruct) string {
	t.Helper()
	el, ok := c.Node().DefaultChild().(awscdk.CfnElement)
	if !ok {
		el, ok = c.(awscdk.CfnElement)
	}
	if !ok {
		t.Fatalf("%s has no CloudFormation element", *c.Node().Path())
	}
	id, ok := s.stack.Resolve(el.LogicalId()).(string)
	if !ok {
		t.Fatalf("%s: logical id does not resolve to a string", *c.Node().Path())
	}
	return id
}

// The table actions each access level must get, written out here rather
// than taken from the stack package so that a change there shows up as a
// failure: no Scan (the design never scans), no DescribeTable, no Batch*
// (the DynamoDB engine never batches), no ListStreams (it takes no resource,
// and the mapping knows its stream), no wildcards.
var (
	readActions   = []string{"dynamodb:GetItem", "dynamodb:Query"}
	writeActions  = []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"}
	streamActions = []string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}
	// unusedActions were granted once and are never called.
	unusedActions = []string{"dynamodb:BatchGetItem", "dynamodb:BatchWriteItem", "dynamodb:ListStreams", "dynamodb:Scan"}
)

// statement is one IAM policy statement with Action and Resource normalized
// to lists.
type statement struct {
	Effect    string
	Actions   []string
	Resources []any
}

// policyStatements returns the statements of every AWS::IAM::Policy attached
// to the role with the given logical id, and of the role's inline policies.
func (s *synthesized) policyStatements(roleID string) []statement {
	var out []statement
	for _, r := range s.resources {
		switch r.Type {
		case "AWS::IAM::Policy":
			for _, ref := range asList(r.Properties["Roles"]) {
				if m, ok := ref.(map[string]any); ok && m["Ref"] == roleID {
					out = append(out, statements(r.Properties["PolicyDocument"])...)
				}
			}
		}
	}
	if role, ok := s.resources[roleID]; ok {
		for _, p := range asList(role.Properties["Policies"]) {
			if m, ok := p.(map[string]any); ok {
				out = append(out, statements(m["PolicyDocument"])...)
			}
		}
	}
	return out
}

// allStatements is every IAM statement in the template: policies and roles'
// inline policies.
func (s *synthesized) allStatements() []statement {
	var out []statement
	for _, r := range s.resources {
		switch r.Type {
		case "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy":
			out = append(out, statements(r.Properties["PolicyDocument"])...)
		case "AWS::IAM::Role":
			for _, p := range asList(r.Properties["Policies"]) {
				if m, ok := p.(map[string]any); ok {
					out = append(out, statements(m["PolicyDocument"])...)
				}
			}
		}
	}
	return out
}

func statements(doc any) []statement {
	m, _ := doc.(map[string]any)
	var out []statement
	for _, raw := range asList(m["Statement"]) {
		st, _ := raw.(map[string]any)
		var actions []string
		for _, a := range asList(st["Action"]) {
			actions = append(actions, fmt.Sprint(a))
		}
		effect, _ := st["Effect"].(string)
		out = append(out, statement{Effect: effect, Actions: actions, Resources: asList(st["Resource"])})
	}
	return out
}

func asList(v any) []any {
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		return v
	default:
		return []any{v}
	}
}

// dynamoActions are the dynamodb: actions among statements, sorted and
// distinct.
func dynamoActions(sts []statement) []string {
	var out []string
	for _, st := range sts {
		for _, a := range st.Actions {
			if strings.HasPrefix(a, "dynamodb:") && !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	sort.Strings(out)
	return out
}

func sorted(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	sort.Strings(out)
	return out
}

// accessOf is the table access the stack must grant a function: its own
// setting joined with its routes'.
func accessOf(p stack.Props, name string) routes.Access {
	var a routes.Access
	for _, fn := range p.Functions {
		if fn.Name == name {
			a = fn.Table
		}
	}
	for _, r := range p.Routes {
		if r.Function == name {
			a = max(a, r.Table)
		}
	}
	return a
}

func hasTrigger(fn routes.Function, kind routes.TriggerKind) bool {
	return slices.ContainsFunc(fn.Triggers, func(tr routes.Trigger) bool { return tr.Kind == kind })
}

// checkCommon is what every stack must satisfy whatever its inputs: a route
// per input route wired to its function, a function per input function with
// the Lambda settings of the design, the table from the schema, least
// privilege IAM and the outputs.
func checkCommon(t *testing.T, s *synthesized) {
	t.Run("routes", func(t *testing.T) { checkRoutes(t, s) })
	t.Run("functions", func(t *testing.T) { checkFunctions(t, s) })
	t.Run("table", func(t *testing.T) { checkTable(t, s) })
	t.Run("iam", func(t *testing.T) { checkIAM(t, s) })
	t.Run("stream urls", func(t *testing.T) { checkStreamURLs(t, s) })
	t.Run("stage", func(t *testing.T) { checkStage(t, s) })
	t.Run("nag", func(t *testing.T) { checkNag(t, s) })
	t.Run("monitoring", func(t *testing.T) { checkMonitoring(t, s) })
	t.Run("deploy settings", func(t *testing.T) { checkDeploySettings(t, s) })
	t.Run("outputs", func(t *testing.T) {
		for _, name := range []string{"ApiUrl", "PublicUrl", "TableName"} {
			if _, ok := s.outputs[name]; !ok {
				t.Errorf("output %s missing; have %v", name, s.outputs)
			}
		}
		checkAssertion(t, "TableName output", func() {
			s.template.HasOutput(jsii.String("TableName"), map[string]any{
				"Value": map[string]any{"Ref": s.logicalID(t, s.stack.Table)},
			})
		})
	})
}

func checkRoutes(t *testing.T, s *synthesized) {
	apiID := s.logicalID(t, s.stack.API)
	checkAssertion(t, "one HTTP API", func() {
		s.template.ResourceCountIs(jsii.String("AWS::ApiGatewayV2::Api"), jsii.Number(1))
		s.template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Api"), map[string]any{"ProtocolType": "HTTP"})
		s.template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Stage"), map[string]any{
			"StageName": "$default", "AutoDeploy": true,
		})
	})
	checkAssertion(t, "route count", func() {
		s.template.ResourceCountIs(jsii.String("AWS::ApiGatewayV2::Route"), jsii.Number(float64(len(apiRoutes(s.props)))))
	})

	// Which function each integration invokes.
	integrationFn := map[string]string{}
	fnByID := map[string]string{}
	for name, fn := range s.stack.Functions {
		fnByID[s.logicalID(t, fn)] = name
	}
	for id, r := range s.ofType("AWS::ApiGatewayV2::Integration") {
		if r.Properties["IntegrationType"] != "AWS_PROXY" || r.Properties["PayloadFormatVersion"] != "2.0" {
			t.Errorf("integration %s: type %v payload %v, want AWS_PROXY 2.0", id, r.Properties["IntegrationType"], r.Properties["PayloadFormatVersion"])
		}
		uri, _ := r.Properties["IntegrationUri"].(map[string]any)
		getAtt, _ := uri["Fn::GetAtt"].([]any)
		if len(getAtt) != 2 || getAtt[1] != "Arn" {
			t.Errorf("integration %s: IntegrationUri %v is not a function ARN", id, r.Properties["IntegrationUri"])
			continue
		}
		integrationFn[id] = fnByID[fmt.Sprint(getAtt[0])]
	}

	byKey := map[string]resource{}
	for _, r := range s.ofType("AWS::ApiGatewayV2::Route") {
		byKey[fmt.Sprint(r.Properties["RouteKey"])] = r
	}
	for _, want := range apiRoutes(s.props) {
		checkAssertion(t, "route "+want.Key(), func() {
			s.template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Route"), map[string]any{
				"RouteKey": want.Key(),
				"ApiId":    map[string]any{"Ref": apiID},
			})
		})
		r, ok := byKey[want.Key()]
		if !ok {
			continue
		}
		if r.Properties["AuthorizationType"] != nil && r.Properties["AuthorizationType"] != "NONE" {
			t.Errorf("route %s: AuthorizationType %v; the handlers authenticate (design §7)", want.Key(), r.Properties["AuthorizationType"])
		}
		// Target is {"Fn::Join": ["", ["integrations/", {"Ref": <integration>}]]}.
		raw, _ := json.Marshal(r.Properties["Target"])
		var target struct {
			Join []json.RawMessage `json:"Fn::Join"`
		}
		var parts []json.RawMessage
		var ref struct{ Ref string }
		if json.Unmarshal(raw, &target) != nil || len(target.Join) != 2 ||
			json.Unmarshal(target.Join[1], &parts) != nil || len(parts) != 2 ||
			json.Unmarshal(parts[1], &ref) != nil {
			t.Errorf("route %s: unexpected Target %s", want.Key(), raw)
			continue
		}
		if got := integrationFn[ref.Ref]; got != want.Function {
			t.Errorf("route %s goes to function %q, want %q", want.Key(), got, want.Function)
		}
	}
	// Every route may invoke its function, and only from this API.
	perms := 0
	for id, r := range s.ofType("AWS::Lambda::Permission") {
		if r.Properties["Principal"] != "apigateway.amazonaws.com" {
			continue
		}
		perms++
		if r.Properties["SourceArn"] == nil {
			t.Errorf("permission %s: API Gateway may invoke from any API (no SourceArn)", id)
		}
	}
	if perms != len(apiRoutes(s.props)) {
		t.Errorf("%d API Gateway invoke permissions, want one per route (%d)", perms, len(apiRoutes(s.props)))
	}
}

func checkFunctions(t *testing.T, s *synthesized) {
	lambdas := s.ofType("AWS::Lambda::Function")
	if len(lambdas) != len(s.props.Functions) {
		t.Errorf("%d AWS::Lambda::Function, want one per function (%d)", len(lambdas), len(s.props.Functions))
	}
	retention := 30.0
	if s.props.Stage == stack.ProdStage {
		retention = 90
	}
	for _, fn := range s.props.Functions {
		lf, ok := s.stack.Functions[fn.Name]
		if !ok {
			t.Errorf("function %s not created", fn.Name)
			continue
		}
		id := s.logicalID(t, lf)
		r := s.resources[id]
		p := r.Properties
		if got := fmt.Sprint(p["Architectures"]); got != "[arm64]" {
			t.Errorf("%s: Architectures %s, want [arm64]", fn.Name, got)
		}
		if p["Runtime"] != "provided.al2023" || p["Handler"] != "bootstrap" {
			t.Errorf("%s: runtime %v handler %v, want provided.al2023 bootstrap", fn.Name, p["Runtime"], p["Handler"])
		}
		if p["MemorySize"] != float64(fn.MemoryMB) || p["Timeout"] != float64(fn.TimeoutSeconds) {
			t.Errorf("%s: memory %v timeout %v, want %d %d from routes.Config", fn.Name, p["MemorySize"], p["Timeout"], fn.MemoryMB, fn.TimeoutSeconds)
		}
		vars := map[string]any{}
		if env, ok := p["Environment"].(map[string]any); ok {
			vars, _ = env["Variables"].(map[string]any)
		}
		for k, v := range fn.Env {
			if k == stack.NetworkPublicKeyEnv && v == "" {
				// The deploy fills a declared network key variable.
				v = s.props.NetworkPublicKey
			}
			if k == stack.NetworkSigningKeyEnv && v == "" && s.props.NetworkSigningKeySecret != "" {
				// ... and the signing key as a reference to its secret.
				v = stack.SigningKeyReference(s.props.NetworkSigningKeySecret)
			}
			if (k == stack.StreamBaseURLEnv || k == routes.A2ABaseURLEnv) && v == "" {
				// ... and the event stream's origin, from its function
				// URL (checkStreamURLs).
				continue
			}
			if k == stack.BaseURLEnv && v == "" && s.props.DomainName != "" {
				// ... and the card's base URL with the custom domain's
				// URL when there is one,
				v = "https://" + s.props.DomainName + "/"
			} else if k == stack.BaseURLEnv && v == "" {
				// ... else with the HTTP API's stage URL:
				// https://<api id>.execute-api.<region>.<suffix>/
				m, _ := vars[k].(map[string]any)
				joined, _ := m["Fn::Join"].([]any)
				if len(joined) != 2 || !strings.Contains(fmt.Sprint(joined[1]), s.logicalID(t, s.stack.API)) ||
					!strings.Contains(fmt.Sprint(joined[1]), "execute-api") {
					t.Errorf("%s: env %s=%v, want the HTTP API's stage URL", fn.Name, k, vars[k])
				}
				continue
			}
			if vars[k] != v {
				t.Errorf("%s: env %s=%v, want %q", fn.Name, k, vars[k], v)
			}
		}
		tableRef := map[string]any{"Ref": s.logicalID(t, s.stack.Table)}
		if accessOf(s.props, fn.Name) == routes.NoTable {
			if _, ok := vars[stack.TableNameEnv]; ok {
				t.Errorf("%s: has %s but does not touch the table", fn.Name, stack.TableNameEnv)
			}
		} else if fmt.Sprint(vars[stack.TableNameEnv]) != fmt.Sprint(tableRef) {
			t.Errorf("%s: %s=%v, want %v", fn.Name, stack.TableNameEnv, vars[stack.TableNameEnv], tableRef)
		}
		// Logs go to the function's own log group, with a retention.
		logging, _ := p["LoggingConfig"].(map[string]any)
		lg, _ := logging["LogGroup"].(map[string]any)
		lgID, _ := lg["Ref"].(string)
		if g, ok := s.resources[lgID]; !ok || g.Type != "AWS::Logs::LogGroup" {
			t.Errorf("%s: LoggingConfig %v does not name a log group of the stack", fn.Name, p["LoggingConfig"])
		} else if g.Properties["RetentionInDays"] != retention {
			t.Errorf("%s: log retention %v days, want %v", fn.Name, g.Properties["RetentionInDays"], retention)
		}
		// Lambda keeps the functions' JSON lines as JSON (logs are JSON in
		// Lambda) and filters on their level.
		for k, want := range map[string]string{"LogFormat": "JSON", "ApplicationLogLevel": "INFO", "SystemLogLevel": "INFO"} {
			if logging[k] != want {
				t.Errorf("%s: LoggingConfig.%s = %v, want %s", fn.Name, k, logging[k], want)
			}
		}
		// A reservation only when the deploy asked: by the function's
		// name, else by its class.
		want, reserved := s.props.ReservedConcurrency[fn.Name]
		if !reserved {
			if class := stack.FunctionClass(fn, s.props.Routes); class != "" {
				want, reserved = s.props.ReservedConcurrency[class]
			}
		}
		switch got, has := p["ReservedConcurrentExecutions"]; {
		case !reserved && has:
			t.Errorf("%s: ReservedConcurrentExecutions %v, but the deploy asked for none", fn.Name, got)
		case reserved && got != float64(want):
			t.Errorf("%s: ReservedConcurrentExecutions %v, want %d", fn.Name, got, want)
		}
		// The code is the function's own asset, i.e. build/<name>.
		if code, _ := p["Code"].(map[string]any); code["S3Key"] == nil {
			t.Errorf("%s: Code %v is not an asset", fn.Name, p["Code"])
		}
	}
	checkAssertion(t, "every function arm64 provided.al2023 bootstrap", func() {
		s.template.AllResourcesProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
			"Architectures": []any{"arm64"},
			"Runtime":       "provided.al2023",
			"Handler":       "bootstrap",
		})
	})
	checkAssertion(t, "one log group per function and the access log", func() {
		s.template.ResourceCountIs(jsii.String("AWS::Logs::LogGroup"), jsii.Number(float64(len(s.props.Functions)+1)))
	})
	checkAssertion(t, "every function logs JSON", func() {
		s.template.AllResourcesProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
			"LoggingConfig": assertions.Match_ObjectLike(&map[string]any{"LogFormat": "JSON"}),
		})
	})
	total := 0
	for _, fn := range s.props.Functions {
		n, _ := s.resources[s.logicalID(t, s.stack.Functions[fn.Name])].Properties["ReservedConcurrentExecutions"].(float64)
		total += int(n)
	}
	t.Logf("reserved concurrency: %d in total over %d functions", total, len(s.props.Functions))
	if limit := stack.DefaultAccountConcurrency - stack.MinUnreservedConcurrency; s.props.AccountConcurrency == 0 && total > limit {
		t.Errorf("reserved concurrency totals %d, over the %d a default account allows", total, limit)
	}
}

// accessLogFields are the access log fields docs/deploying.md lists, each with
// the API Gateway variable it must carry, written out here so that a change
// in the stack shows up as a failure.
var accessLogFields = map[string]string{
	"requestId":               "$context.requestId",
	"routeKey":                "$context.routeKey",
	"status":                  "$context.status",
	"integrationStatus":       "$context.integrationStatus",
	"integrationError":        "$context.integration.error",
	"integrationErrorMessage": "$context.integrationErrorMessage",
	"responseLatency":         "$context.responseLatency",
	"integrationLatency":      "$context.integrationLatency",
	"integrationRequestId":    "$context.integration.requestId",
}

// checkStage checks the production shape of the API stage:
// default route throttling and JSON access logs to a log group with a
// retention.
func checkStage(t *testing.T, s *synthesized) {
	stages := s.ofType("AWS::ApiGatewayV2::Stage")
	if len(stages) != 1 {
		t.Fatalf("%d stages, want 1", len(stages))
	}
	checkAssertion(t, "default route throttling", func() {
		s.template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Stage"), map[string]any{
			"StageName": "$default",
			"ApiId":     map[string]any{"Ref": s.logicalID(t, s.stack.API)},
			"DefaultRouteSettings": map[string]any{
				"ThrottlingRateLimit":  stack.ThrottleRateLimit,
				"ThrottlingBurstLimit": stack.ThrottleBurstLimit,
			},
		})
	})
	if stack.ThrottleBurstLimit < stack.ThrottleRateLimit {
		t.Errorf("burst %d below rate %d: API Gateway would cap the rate at the burst", stack.ThrottleBurstLimit, stack.ThrottleRateLimit)
	}
	for id, st := range stages {
		settings, _ := st.Properties["AccessLogSettings"].(map[string]any)
		if settings == nil {
			t.Fatalf("stage %s: no AccessLogSettings", id)
		}
		format, _ := settings["Format"].(string)
		var fields map[string]any
		if err := json.Unmarshal([]byte(format), &fields); err != nil {
			t.Fatalf("stage %s: access log format is not a JSON object: %v: %s", id, err, format)
		}
		for name, variable := range accessLogFields {
			if fields[name] != variable {
				t.Errorf("stage %s: access log field %s = %v, want %q", id, name, fields[name], variable)
			}
		}
		if fields["requestId"] == nil {
			t.Errorf("stage %s: access log without the request id", id)
		}
		if got := stack.AccessLogFormat(); got != format {
			t.Errorf("stage %s: format %s, want stack.AccessLogFormat() %s", id, format, got)
		}
		groupID := s.logicalID(t, s.stack.AccessLog)
		dest, _ := json.Marshal(settings["DestinationArn"])
		if !strings.Contains(string(dest), `"`+groupID+`"`) {
			t.Errorf("stage %s: access logs go to %s, not to the access log group %s", id, dest, groupID)
		}
		retention := 30.0
		if s.props.Stage == stack.ProdStage {
			retention = 90
		}
		if g := s.resources[groupID]; g.Properties["RetentionInDays"] != retention {
			t.Errorf("access log group: retention %v days, want %v", g.Properties["RetentionInDays"], retention)
		}
	}
}

// checkNag checks cdk-nag's verdict on the stack: both packs ran, nothing
// is left as an error or warning, every suppression has a written reason,
// and every suppression in the template is used (a rule fired on that very
// resource), so none outlives the finding it was written for.
func checkNag(t *testing.T, s *synthesized) {
	levels := map[string]any{
		"error":   s.annotations.FindError(jsii.String("*"), assertions.Match_AnyValue()),
		"warning": s.annotations.FindWarning(jsii.String("*"), assertions.Match_AnyValue()),
	}
	for _, level := range []string{"error", "warning"} {
		// Decoded from JSON rather than read as cxapi.SynthesisMessage,
		// whose Go type is deprecated.
		raw, err := json.Marshal(levels[level])
		if err != nil {
			t.Fatal(err)
		}
		var msgs []struct {
			ID    string `json:"id"`
			Entry struct {
				Data any `json:"data"`
			} `json:"entry"`
		}
		if err := json.Unmarshal(raw, &msgs); err != nil {
			t.Fatalf("%s annotations: %v: %s", level, err, raw)
		}
		for _, m := range msgs {
			t.Errorf("%s at %s: %v", level, m.ID, m.Entry.Data)
		}
	}
	packs := map[string]int{}
	suppressed := map[string]bool{} // "<path> <rule>"
	for _, r := range s.nag {
		pack, _, _ := strings.Cut(r.Rule, "-")
		packs[pack]++
		switch r.Compliance {
		case "Compliant", "N/A":
		case "Suppressed":
			suppressed[r.Resource+" "+r.Rule] = true
			if len(r.Reason) < 40 {
				t.Errorf("%s on %s suppressed with reason %q", r.Rule, r.Resource, r.Reason)
			}
		default:
			t.Errorf("%s on %s: %s (%s)", r.Rule, r.Resource, r.Compliance, r.Level)
		}
	}
	if packs["AwsSolutions"] == 0 || packs["Serverless"] == 0 {
		t.Errorf("rules evaluated per pack: %v; want both AwsSolutions and Serverless", packs)
	}
	// What the production shape is for: these rules must pass outright.
	for _, rule := range []string{"AwsSolutions-APIG1", "Serverless-APIGWAccessLogging", "Serverless-APIGWStructuredLogging",
		"Serverless-APIGWDefaultThrottling", "AwsSolutions-DDB3", "Serverless-CloudWatchLogGroupRetentionPeriod"} {
		if !slices.ContainsFunc(s.nag, func(r nagRow) bool { return r.Rule == rule && r.Compliance == "Compliant" }) {
			t.Errorf("%s: no Compliant verdict", rule)
		}
	}
	byID := map[string]string{}
	for path, id := range s.paths {
		byID[id] = path
	}
	count := 0
	for id, r := range s.resources {
		md, _ := r.Metadata["cdk_nag"].(map[string]any)
		for _, raw := range asList(md["rules_to_suppress"]) {
			sup, _ := raw.(map[string]any)
			rule, _ := sup["id"].(string)
			reason, _ := sup["reason"].(string)
			count++
			if len(reason) < 40 {
				t.Errorf("%s: suppression of %s has no written reason: %q", id, rule, reason)
			}
			if !suppressed[byID[id]+" "+rule] {
				t.Errorf("%s (%s): suppression of %s is not used; remove it", id, byID[id], rule)
			}
		}
	}
	t.Logf("cdk-nag: %d rule verdicts %v, %d suppressions in the template", len(s.nag), packs, count)
}

func checkTable(t *testing.T, s *synthesized) {
	def := schema.Default()
	keys := []any{map[string]any{"AttributeName": def.PartitionKey.Name, "KeyType": "HASH"}}
	attrs := []any{map[string]any{"AttributeName": def.PartitionKey.Name, "AttributeType": string(def.PartitionKey.Type)}}
	if def.SortKey.Name != "" {
		keys = append(keys, map[string]any{"AttributeName": def.SortKey.Name, "KeyType": "RANGE"})
		attrs = append(attrs, map[string]any{"AttributeName": def.SortKey.Name, "AttributeType": string(def.SortKey.Type)})
	}
	var gsis []any
	for _, idx := range def.Indexes {
		ks := []any{map[string]any{"AttributeName": idx.PartitionKey.Name, "KeyType": "HASH"}}
		attrs = append(attrs, map[string]any{"AttributeName": idx.PartitionKey.Name, "AttributeType": string(idx.PartitionKey.Type)})
		if idx.SortKey.Name != "" {
			ks = append(ks, map[string]any{"AttributeName": idx.SortKey.Name, "KeyType": "RANGE"})
			attrs = append(attrs, map[string]any{"AttributeName": idx.SortKey.Name, "AttributeType": string(idx.SortKey.Type)})
		}
		gsis = append(gsis, map[string]any{
			"IndexName":  idx.Name,
			"KeySchema":  ks,
			"Projection": map[string]any{"ProjectionType": "ALL"},
		})
	}
	prod := s.props.Stage == stack.ProdStage
	checkAssertion(t, "table from schema.Default()", func() {
		s.template.ResourceCountIs(jsii.String("AWS::DynamoDB::Table"), jsii.Number(1))
		s.template.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"KeySchema":                        keys,
			"AttributeDefinitions":             assertions.Match_ArrayWith(&attrs),
			"GlobalSecondaryIndexes":           gsis,
			"BillingMode":                      "PAY_PER_REQUEST",
			"TimeToLiveSpecification":          map[string]any{"AttributeName": def.TTLAttribute, "Enabled": true},
			"StreamSpecification":              map[string]any{"StreamViewType": def.StreamView},
			"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
			"DeletionProtectionEnabled":        prod,
		})
	})
	policy := "Delete"
	if prod {
		policy = "Retain"
	}
	checkAssertion(t, "table removal policy", func() {
		s.template.HasResource(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"DeletionPolicy":      policy,
			"UpdateReplacePolicy": policy,
		})
	})
	for id, r := range s.ofType("AWS::DynamoDB::Table") {
		if n := len(asList(r.Properties["AttributeDefinitions"])); n != len(attrs) {
			t.Errorf("table %s: %d attribute definitions, want exactly the %d key attributes", id, n, len(attrs))
		}
	}
}

func checkIAM(t *testing.T, s *synthesized) {
	// Nowhere in the template: dynamodb wildcards, or a dynamodb action on
	// every resource.
	for _, st := range s.allStatements() {
		var ddb []string
		for _, a := range st.Actions {
			if a == "*" || strings.HasPrefix(a, "dynamodb:") {
				ddb = append(ddb, a)
			}
		}
		if len(ddb) == 0 {
			continue
		}
		for _, a := range ddb {
			if strings.Contains(a, "*") {
				t.Errorf("statement grants %q", a)
			}
		}
		for _, r := range st.Resources {
			if r == "*" {
				t.Errorf("statement grants %v on Resource \"*\"", ddb)
			}
		}
	}
	// No role carries a managed policy: AWSLambdaBasicExecutionRole would
	// give logs on "*" where each function needs only its own log group.
	for id, r := range s.ofType("AWS::IAM::Role") {
		if r.Properties["ManagedPolicyArns"] != nil {
			t.Errorf("role %s has managed policies %v", id, r.Properties["ManagedPolicyArns"])
		}
	}

	tableArn := fmt.Sprint(map[string]any{"Fn::GetAtt": []any{s.logicalID(t, s.stack.Table), "Arn"}})
	for _, fn := range s.props.Functions {
		sts := s.policyStatements(s.logicalID(t, s.stack.Roles[fn.Name]))
		var want []string
		switch accessOf(s.props, fn.Name) {
		case routes.ReadOnly:
			want = sorted(readActions)
		case routes.ReadWrite:
			want = sorted(readActions, writeActions)
		}
		if hasTrigger(fn, routes.StreamTrigger) {
			want = sorted(want, streamActions)
		}
		if got := dynamoActions(sts); !slices.Equal(got, want) {
			t.Errorf("%s (table access %s): dynamodb actions %v, want %v", fn.Name, accessOf(s.props, fn.Name), got, want)
		}
		// Table actions only on this table and its indexes; stream actions
		// only on its streams.
		for _, st := range sts {
			if len(dynamoActions([]statement{st})) == 0 {
				continue
			}
			for _, r := range st.Resources {
				if !strings.Contains(fmt.Sprint(r), tableArn) {
					t.Errorf("%s: dynamodb statement on %v, which is not the table", fn.Name, r)
				}
			}
		}
		// Logs only to its own log group.
		for _, st := range sts {
			for _, a := range st.Actions {
				if strings.HasPrefix(a, "logs:") && slices.Contains(st.Resources, any("*")) {
					t.Errorf("%s: %s on \"*\"", fn.Name, a)
				}
			}
		}
	}
}

// TestCheckoutStack synthesizes what `make synth` deploys for this checkout
// (dev stage): every functions/* folder and every route of routes.All().
func TestCheckoutStack(t *testing.T) {
	props := checkoutProps(t, "dev")
	s := synth(t, props)
	checkCommon(t, s)

	t.Run("no reservation by default", func(t *testing.T) { checkNoReservation(t, s) })
	t.Run("every route of routes.All()", func(t *testing.T) {
		for _, r := range routes.All() {
			if routes.Streamed(r.Function) {
				continue // its function URL's (checkStreamURLs)
			}
			checkAssertion(t, r.Key(), func() {
				s.template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Route"), map[string]any{"RouteKey": r.Key()})
			})
		}
	})
	t.Run("one function per folder", func(t *testing.T) {
		root, _ := repo.Root(".")
		folders, _ := repo.Functions(root)
		checkAssertion(t, "function count", func() {
			s.template.ResourceCountIs(jsii.String("AWS::Lambda::Function"), jsii.Number(float64(len(folders))))
		})
		for _, name := range folders {
			if _, ok := s.stack.Functions[name]; !ok {
				t.Errorf("functions/%s has no Lambda", name)
			}
		}
	})
	t.Run("stream filters are the harness's", func(t *testing.T) { checkStreamFilters(t, s) })
	t.Run("the event stream has a RESPONSE_STREAM URL", func(t *testing.T) {
		if _, ok := s.stack.StreamURLs[routes.EventStreamFunction]; !ok || !routes.Streamed(routes.EventStreamFunction) {
			t.Errorf("%s: no function URL (streaming %v)", routes.EventStreamFunction, routes.Streamed(routes.EventStreamFunction))
		}
	})
	t.Run("delivery queues", func(t *testing.T) { checkQueues(t, s) })
	t.Run("action queue", func(t *testing.T) { checkActionQueue(t, s) })
	t.Run("table access matches routes.TableAccess", func(t *testing.T) {
		for _, fn := range props.Functions {
			if got, want := accessOf(props, fn.Name), routes.TableAccess(fn.Name); got != want {
				t.Errorf("%s: stack grants %s, routes.TableAccess says %s", fn.Name, got, want)
			}
		}
	})
	t.Run("dev data is disposable", func(t *testing.T) {
		if name := *s.stack.StackName(); name != "a2awire-dev" {
			t.Errorf("stack name %q", name)
		}
		for id, r := range s.ofType("AWS::Logs::LogGroup") {
			if r.DeletionPolicy != "Delete" {
				t.Errorf("log group %s: DeletionPolicy %q", id, r.DeletionPolicy)
			}
		}
	})
}

// Extra inputs that no function of the checkout uses yet: a stream and
// schedule driven function (what the webhook dispatcher will be), a new
// folder with a read-only route, one with read and write routes, and one
// that never touches the table.
var (
	dispatcher = routes.Function{
		Name: "test-dispatcher", MemoryMB: 256, TimeoutSeconds: 60, Table: routes.ReadWrite,
		Env: map[string]string{"DISPATCH_TIMEOUT": "5s"},
		Triggers: []routes.Trigger{
			{Kind: routes.StreamTrigger, BatchSize: 25, BatchWindowSeconds: 5, ReportBatchItemFailures: true,
				RetryAttempts: 3, MaxRecordAgeSeconds: 600, BisectOnError: true},
			{Kind: routes.ScheduleTrigger, Schedule: "rate(1 minute)"},
		},
	}
	// tailer has a stream trigger with every setting left at its default.
	tailer = routes.Function{
		Name: "test-tailer", MemoryMB: 128, TimeoutSeconds: 30, Table: routes.ReadOnly,
		Triggers: []routes.Trigger{{Kind: routes.StreamTrigger}},
	}
	extraFunctions = []routes.Function{
		dispatcher,
		tailer,
		routes.DefaultFunction("test-reader"),
		routes.DefaultFunction("test-writer"),
		routes.DefaultFunction("test-public"),
	}
	extraRoutes = []routes.Route{
		{Method: "GET", Path: "/test/reader/{id}", Function: "test-reader", Auth: routes.Public, Table: routes.ReadOnly},
		{Method: "GET", Path: "/test/reader/{id}/items/{rest+}", Function: "test-reader", Auth: routes.Public, Table: routes.ReadOnly},
		{Method: "GET", Path: "/test/writer", Function: "test-writer", Auth: routes.Public, Table: routes.ReadOnly},
		{Method: "POST", Path: "/test/writer", Function: "test-writer", Auth: routes.Signed, Table: routes.ReadWrite},
		{Method: "ANY", Path: "/test/public", Function: "test-public", Auth: routes.Public, Table: routes.NoTable},
	}
)

// TestExtendedStack adds functions and routes to the checkout's inputs, as a
// new functions/* folder and route-table entry would, and checks that they
// are deployed without any change to infra/, along with the stream and
// schedule wiring.
func TestExtendedStack(t *testing.T) {
	props := checkoutProps(t, "dev")
	base := len(props.Functions)
	props.Functions = append(props.Functions, extraFunctions...)
	props.Routes = append(props.Routes, extraRoutes...)
	// Reservations from cdk.json or -c reservedConcurrency=...: a class
	// and a function by name.
	props.ReservedConcurrency = map[string]int{"fixture": 5, dispatcher.Name: 25}
	s := synth(t, props)
	checkCommon(t, s)

	t.Run("reservations by class and by name", func(t *testing.T) {
		want := map[string]int{"fixture-clean": 5, "fixture-ledger": 5, "fixture-messy": 5, "fixture-punctual": 5,
			"fixture-translator": 5, dispatcher.Name: 25}
		got := map[string]int{}
		for name, fn := range s.stack.Functions {
			if n, ok := s.resources[s.logicalID(t, fn)].Properties["ReservedConcurrentExecutions"].(float64); ok {
				got[name] = int(n)
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("reservations %v, want %v", got, want)
		}
		plan := stack.PlanConcurrency(props)
		if plan.Total != 50 || plan.RequiredQuota != 150 {
			t.Errorf("plan %+v, want 50 reserved and a quota of at least 150", plan)
		}
		t.Logf("pre-deploy check: %s", plan)
	})

	t.Run("new function and route are deployed", func(t *testing.T) {
		checkAssertion(t, "function count", func() {
			s.template.ResourceCountIs(jsii.String("AWS::Lambda::Function"), jsii.Number(float64(base+len(extraFunctions))))
		})
		for _, r := range extraRoutes {
			checkAssertion(t, r.Key(), func() {
				s.template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Route"), map[string]any{"RouteKey": r.Key()})
			})
		}
		checkAssertion(t, "test-reader function", func() {
			s.template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
				"Description": "a2awire dev test-reader",
			})
		})
	})

	t.Run("read-only function cannot write", func(t *testing.T) {
		got := dynamoActions(s.policyStatements(s.logicalID(t, s.stack.Roles["test-reader"])))
		for _, a := range got {
			if slices.Contains(writeActions, a) {
				t.Errorf("test-reader has %s", a)
			}
		}
		if len(got) == 0 {
			t.Error("test-reader cannot read either")
		}
	})

	t.Run("no-table function has no dynamodb actions", func(t *testing.T) {
		if got := dynamoActions(s.policyStatements(s.logicalID(t, s.stack.Roles["test-public"]))); len(got) > 0 {
			t.Errorf("test-public has %v", got)
		}
	})

	t.Run("stream trigger", func(t *testing.T) {
		streamed := []routes.Function{dispatcher, tailer}
		// The route table's own stream-triggered functions (the webhook
		// dispatcher) get theirs too.
		n := len(streamed) + tableTriggers(routes.StreamTrigger)
		// Besides: one mapping per queue trigger, and the queue table's
		// queues.
		checkAssertion(t, "one mapping and one failure queue per stream trigger", func() {
			s.template.ResourceCountIs(jsii.String("AWS::Lambda::EventSourceMapping"), jsii.Number(float64(n+tableTriggers(routes.QueueTrigger))))
			s.template.ResourceCountIs(jsii.String("AWS::SQS::Queue"), jsii.Number(float64(n+len(routes.Queues()))))
		})
		// The dispatcher sets every setting of its trigger; the tailer none,
		// so it gets routes.DefaultStreamBatchSize, no window and whole-batch
		// failure semantics.
		settings := map[string]map[string]any{
			dispatcher.Name: {
				"BatchSize":                      25,
				"MaximumBatchingWindowInSeconds": 5,
				"FunctionResponseTypes":          []any{"ReportBatchItemFailures"},
			},
			tailer.Name: {
				"BatchSize":                      routes.DefaultStreamBatchSize,
				"MaximumBatchingWindowInSeconds": assertions.Match_Absent(),
				"FunctionResponseTypes":          assertions.Match_Absent(),
			},
		}
		for _, fn := range streamed {
			tr := fn.Triggers[0]
			fnID := s.logicalID(t, s.stack.Functions[fn.Name])
			queue, ok := s.stack.FailureQueues[fn.Name]
			if !ok {
				t.Fatalf("%s: no failure queue", fn.Name)
			}
			queueID := s.logicalID(t, queue)
			want := map[string]any{
				"FunctionName":               map[string]any{"Ref": fnID},
				"EventSourceArn":             map[string]any{"Fn::GetAtt": []any{s.logicalID(t, s.stack.Table), "StreamArn"}},
				"StartingPosition":           "TRIM_HORIZON",
				"BisectBatchOnFunctionError": tr.BisectOnError,
				"MaximumRetryAttempts":       tr.StreamRetries(),
				"MaximumRecordAgeInSeconds":  tr.StreamMaxRecordAge(),
				"DestinationConfig": map[string]any{"OnFailure": map[string]any{
					"Destination": map[string]any{"Fn::GetAtt": []any{queueID, "Arn"}},
				}},
			}
			maps.Copy(want, settings[fn.Name])
			checkAssertion(t, fn.Name+" event source mapping", func() {
				s.template.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), want)
			})
			checkAssertion(t, fn.Name+" failure queue", func() {
				s.template.HasResource(jsii.String("AWS::SQS::Queue"), map[string]any{
					"Properties": assertions.Match_ObjectLike(&map[string]any{
						"MessageRetentionPeriod": stack.FailureRetentionDays * 24 * 3600,
						"SqsManagedSseEnabled":   true,
					}),
				})
				if _, ok := s.resources[queueID]; !ok {
					t.Errorf("queue %s not in the template", queueID)
				}
			})
			// The role may send to its queue and read the stream.
			var sendsToQueue, streamScoped bool
			for _, st := range s.policyStatements(s.logicalID(t, s.stack.Roles[fn.Name])) {
				if slices.Contains(st.Actions, "sqs:SendMessage") && strings.Contains(fmt.Sprint(st.Resources), queueID) {
					sendsToQueue = true
				}
				if slices.Contains(st.Actions, "dynamodb:GetRecords") {
					streamScoped = len(st.Resources) == 1 && strings.Contains(fmt.Sprint(st.Resources[0]), "/stream/*")
				}
			}
			if !sendsToQueue {
				t.Errorf("%s may not send to its failure queue", fn.Name)
			}
			if !streamScoped {
				t.Errorf("%s: stream read is not scoped to the table's streams", fn.Name)
			}
		}
		// Only stream-triggered functions read the stream.
		for _, fn := range props.Functions {
			if hasTrigger(fn, routes.StreamTrigger) {
				continue
			}
			for _, a := range dynamoActions(s.policyStatements(s.logicalID(t, s.stack.Roles[fn.Name]))) {
				if slices.Contains(streamActions, a) {
					t.Errorf("%s has %s", fn.Name, a)
				}
			}
		}
	})

	t.Run("schedule trigger", func(t *testing.T) {
		fnID := s.logicalID(t, s.stack.Functions[dispatcher.Name])
		// The test dispatcher's rule is the one targeting it; the route
		// table's own schedules (webhook-retry) have one each besides.
		var ruleID string
		for id, r := range s.ofType("AWS::Events::Rule") {
			if b, _ := json.Marshal(r); strings.Contains(string(b), `"`+fnID+`"`) {
				ruleID = id
			}
		}
		checkAssertion(t, "rule", func() {
			s.template.ResourceCountIs(jsii.String("AWS::Events::Rule"), jsii.Number(float64(1+tableTriggers(routes.ScheduleTrigger))))
			s.template.HasResourceProperties(jsii.String("AWS::Events::Rule"), map[string]any{
				"ScheduleExpression": "rate(1 minute)",
				"State":              "ENABLED",
				"Targets": []any{assertions.Match_ObjectLike(&map[string]any{
					"Arn": map[string]any{"Fn::GetAtt": []any{fnID, "Arn"}},
				})},
			})
			s.template.HasResourceProperties(jsii.String("AWS::Lambda::Permission"), map[string]any{
				"Action":       "lambda:InvokeFunction",
				"Principal":    "events.amazonaws.com",
				"FunctionName": map[string]any{"Fn::GetAtt": []any{fnID, "Arn"}},
				"SourceArn":    map[string]any{"Fn::GetAtt": []any{ruleID, "Arn"}},
			})
		})
	})
}

// TestProdStack checks what the prod stage changes: the table survives
// deletion twice over (deletion protection and RETAIN), logs are kept
// longer and retained.
func TestProdStack(t *testing.T) {
	props := checkoutProps(t, stack.ProdStage)
	props.Functions = append(props.Functions, dispatcher)
	s := synth(t, props)
	checkCommon(t, s)
	t.Run("no reservation by default", func(t *testing.T) { checkNoReservation(t, s) })

	t.Run("retained data", func(t *testing.T) {
		if name := *s.stack.StackName(); name != "a2awire-prod" {
			t.Errorf("stack name %q", name)
		}
		checkAssertion(t, "table", func() {
			s.template.HasResource(jsii.String("AWS::DynamoDB::Table"), map[string]any{
				"DeletionPolicy": "Retain",
				"Properties":     assertions.Match_ObjectLike(&map[string]any{"DeletionProtectionEnabled": true}),
			})
		})
		for _, typ := range []string{"AWS::Logs::LogGroup", "AWS::SQS::Queue"} {
			for id, r := range s.ofType(typ) {
				if r.DeletionPolicy != "Retain" {
					t.Errorf("%s %s: DeletionPolicy %q, want Retain", typ, id, r.DeletionPolicy)
				}
			}
		}
	})
}

// TestInputs checks how the checkout's folders become stack inputs.
func TestInputs(t *testing.T) {
	all := routes.Functions()
	t.Run("every folder is a function", func(t *testing.T) {
		folders := append(slices.Clone(all), "zz-not-routed-yet")
		rs, fns, err := stack.Inputs(folders)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != len(routes.All()) {
			t.Errorf("%d routes, want %d", len(rs), len(routes.All()))
		}
		var names []string
		for _, fn := range fns {
			names = append(names, fn.Name)
			if want := routes.Config(fn.Name); fn.MemoryMB != want.MemoryMB || fn.TimeoutSeconds != want.TimeoutSeconds {
				t.Errorf("%s: settings %+v, want routes.Config's %+v", fn.Name, fn, want)
			}
		}
		if !slices.Equal(names, folders) {
			t.Errorf("functions %v, want the folders %v", names, folders)
		}
	})
	t.Run("routed function without a folder", func(t *testing.T) {
		if len(all) == 0 {
			t.Fatal("route table names no function")
		}
		_, _, err := stack.Inputs(all[1:])
		if err == nil || !strings.Contains(err.Error(), all[0]) {
			t.Errorf("err = %v, want one naming %s", err, all[0])
		}
	})
}

// TestValidate checks that inconsistent inputs fail before anything is
// synthesized, with an error that says what is wrong.
func TestValidate(t *testing.T) {
	assets := t.TempDir()
	if err := os.WriteFile(filepath.Join(assets, "bootstrap"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	good := func() stack.Props {
		return stack.Props{
			Stage:     "dev",
			Routes:    []routes.Route{{Method: "GET", Path: "/a/{x}", Function: "fn-a"}},
			Functions: []routes.Function{routes.DefaultFunction("fn-a")},
			Table:     schema.Default(),
			AssetDir:  func(string) string { return assets },
		}
	}
	cases := []struct {
		name   string
		change func(*stack.Props)
		want   string
	}{
		{"bad stage", func(p *stack.Props) { p.Stage = "Prod!" }, "stage"},
		{"route to unknown function", func(p *stack.Props) { p.Routes[0].Function = "fn-b" }, `function "fn-b"`},
		{"bad method", func(p *stack.Props) { p.Routes[0].Method = "FETCH" }, `method "FETCH"`},
		{"same route twice", func(p *stack.Props) {
			p.Routes = append(p.Routes, routes.Route{Method: "GET", Path: "/a/{y}", Function: "fn-a"})
		}, "same API Gateway route"},
		{"duplicate function", func(p *stack.Props) { p.Functions = append(p.Functions, p.Functions[0]) }, "listed twice"},
		{"memory", func(p *stack.Props) { p.Functions[0].MemoryMB = 64 }, "memory"},
		{"route timeout over API Gateway's", func(p *stack.Props) { p.Functions[0].TimeoutSeconds = 31 }, "timeout 31 s serves routes"},
		{"reserved env", func(p *stack.Props) { p.Functions[0].Env = map[string]string{stack.TableNameEnv: "x"} }, stack.TableNameEnv},
		{"bad schedule", func(p *stack.Props) {
			p.Functions[0].Triggers = []routes.Trigger{{Kind: routes.ScheduleTrigger, Schedule: "every minute"}}
		}, "schedule"},
		{"stream without stream", func(p *stack.Props) {
			p.Table.StreamView = ""
			p.Functions[0].Triggers = []routes.Trigger{{Kind: routes.StreamTrigger}}
		}, "no stream"},
		{"no asset dir", func(p *stack.Props) { p.AssetDir = nil }, "AssetDir"},
		{"stream batch too large", func(p *stack.Props) {
			p.Functions[0].Triggers = []routes.Trigger{{Kind: routes.StreamTrigger, BatchSize: stack.MaxStreamBatchSize + 1}}
		}, "batch size 10001"},
		{"negative stream batch", func(p *stack.Props) {
			p.Functions[0].Triggers = []routes.Trigger{{Kind: routes.StreamTrigger, BatchSize: -1}}
		}, "batch size -1"},
		{"stream window too long", func(p *stack.Props) {
			p.Functions[0].Triggers = []routes.Trigger{{Kind: routes.StreamTrigger, BatchWindowSeconds: stack.MaxStreamBatchWindowS + 1}}
		}, "batch window 301"},
		{"empty stream filter", func(p *stack.Props) {
			p.Functions[0].Triggers = []routes.Trigger{{Kind: routes.StreamTrigger, Filters: []routes.StreamFilter{{}}}}
		}, "empty stream filter"},
		{"too many stream filters", func(p *stack.Props) {
			p.Functions[0].Triggers = []routes.Trigger{{Kind: routes.StreamTrigger, Filters: slices.Repeat([]routes.StreamFilter{routes.EventInserts()}, stack.MaxStreamFilters+1)}}
		}, "6 stream filters"},
		{"filter on a schedule", func(p *stack.Props) {
			p.Functions[0].Triggers = []routes.Trigger{{Kind: routes.ScheduleTrigger, Schedule: "rate(1 minute)", Filters: []routes.StreamFilter{routes.EventInserts()}}}
		}, "filters on a schedule"},
		{"reservation for an unknown function", func(p *stack.Props) {
			p.ReservedConcurrency = map[string]int{"fn-typo": 5}
		}, `"fn-typo": no such function`},
		{"zero reservation", func(p *stack.Props) {
			p.ReservedConcurrency = map[string]int{"fn-a": 0}
		}, "reserved concurrency 0"},
		{"reservations over the account quota", func(p *stack.Props) {
			p.ReservedConcurrency = map[string]int{"fn-a": 901}
		}, "totals 901"},
		{"a new account's quota takes no reservation", func(p *stack.Props) {
			p.AccountConcurrency = 10
			p.ReservedConcurrency = map[string]int{"fn": 1}
		}, "quota of 10"},
		{"queue consumer reserved under its mapping's concurrency", func(p *stack.Props) {
			p.Functions[0].Triggers = []routes.Trigger{{Kind: routes.QueueTrigger, Queue: routes.DeliveryQueue, MaxConcurrency: 50}}
			p.ReservedConcurrency = map[string]int{"fn-a": 10}
		}, "under its queue trigger's maximum concurrency 50"},
		{"queue batch over 10 without a window", func(p *stack.Props) {
			p.Functions[0].Triggers = []routes.Trigger{{Kind: routes.QueueTrigger, Queue: routes.DeliveryQueue, BatchSize: 11}}
		}, "queue batch size 11 outside 1..10 with a batch window of 0 s"},
		{"queue batch over 10000 with a window", func(p *stack.Props) {
			p.Functions[0].Triggers = []routes.Trigger{{Kind: routes.QueueTrigger, Queue: routes.DeliveryQueue, BatchSize: stack.MaxQueueWindowBatchSize + 1, BatchWindowSeconds: 1}}
		}, "queue batch size 10001 outside 1..10000"},
		{"queue window too long", func(p *stack.Props) {
			p.Functions[0].Triggers = []routes.Trigger{{Kind: routes.QueueTrigger, Queue: routes.DeliveryQueue, BatchWindowSeconds: stack.MaxQueueBatchWindowS + 1}}
		}, "queue batch window 301 s outside 0..300"},
		{"filter on a queue", func(p *stack.Props) {
			p.Functions[0].Triggers = []routes.Trigger{{Kind: routes.QueueTrigger, Queue: routes.DeliveryQueue, Filters: []routes.StreamFilter{routes.EventInserts()}}}
		}, "queue triggers take no filters"},
		{"bad CORS origin", func(p *stack.Props) { p.CorsOrigins = []string{"example.com"} }, `CORS origin "example.com"`},
		{"domain without certificate", func(p *stack.Props) { p.DomainName = "api.example.com" }, "both domainName and certificateArn"},
		{"bad domain", func(p *stack.Props) {
			p.DomainName, p.CertificateArn = "https://api.example.com/", "arn:aws:acm:eu-west-1:123456789012:certificate/x"
		}, "want a DNS name"},
		{"bad alarm email", func(p *stack.Props) { p.AlarmEmail = "ops at example" }, "alarmEmail"},
		{"signing secret with an empty JSON key", func(p *stack.Props) { p.NetworkSigningKeySecret = "s:SecretString:" }, "networkSigningKeySecret"},
		{"signing secret with braces", func(p *stack.Props) { p.NetworkSigningKeySecret = "s}}{{x" }, "braces"},
	}
	if _, err := stack.New(awscdk.NewApp(nil), good()); err != nil {
		t.Fatalf("good inputs: %v", err)
	}
	// A new account's quota of 10 deploys what takes no reservation, and
	// a class reservation is taken.
	small := good()
	small.AccountConcurrency = 10
	if _, err := stack.New(awscdk.NewApp(nil), small); err != nil {
		t.Errorf("quota 10, no reservation: %v", err)
	}
	class := good()
	class.ReservedConcurrency = map[string]int{"fn": 3}
	if _, err := stack.New(awscdk.NewApp(nil), class); err != nil {
		t.Errorf("class reservation: %v", err)
	}
	// The largest reservation a default account allows is accepted.
	edge := good()
	edge.ReservedConcurrency = map[string]int{"fn-a": stack.DefaultAccountConcurrency - stack.MinUnreservedConcurrency}
	if _, err := stack.New(awscdk.NewApp(nil), edge); err != nil {
		t.Errorf("reservation of %d: %v", stack.DefaultAccountConcurrency-stack.MinUnreservedConcurrency, err)
	}
	// A queue batch past 10 is taken with a window of at least 1 s, up to
	// Lambda's 10000 and its 300 s window.
	for _, tr := range []routes.Trigger{
		{Kind: routes.QueueTrigger, Queue: routes.DeliveryQueue, BatchSize: 11, BatchWindowSeconds: 1},
		{Kind: routes.QueueTrigger, Queue: routes.DeliveryQueue, BatchSize: stack.MaxQueueWindowBatchSize, BatchWindowSeconds: stack.MaxQueueBatchWindowS},
	} {
		p := good()
		p.Functions[0].Triggers = []routes.Trigger{tr}
		if _, err := stack.New(awscdk.NewApp(nil), p); err != nil {
			t.Errorf("queue batch %d, window %d s: %v", tr.BatchSize, tr.BatchWindowSeconds, err)
		}
	}
	for _, c := range cases {
		p := good()
		c.change(&p)
		_, err := stack.New(nil, p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// TestParseReservedConcurrency checks the reservedConcurrency context value
// in both the shapes it comes in: a cdk.json object and a -c string.
func TestParseReservedConcurrency(t *testing.T) {
	good := []struct {
		in   any
		want map[string]int
	}{
		{nil, map[string]int{}},
		{map[string]any{"fixture-ledger": 20.0, "fixture-messy": 5.0}, map[string]int{"fixture-ledger": 20, "fixture-messy": 5}},
		{"fixture-ledger=20, fixture-messy=5", map[string]int{"fixture-ledger": 20, "fixture-messy": 5}},
		{"", map[string]int{}},
	}
	for _, c := range good {
		got, err := stack.ParseReservedConcurrency(c.in)
		if err != nil || !maps.Equal(got, c.want) {
			t.Errorf("ParseReservedConcurrency(%#v) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []any{"fixture-ledger", "fixture-ledger=x", "a=-1", map[string]any{"a": 1.5}, map[string]any{"a": "x"}, 12.0} {
		if got, err := stack.ParseReservedConcurrency(bad); err == nil {
			t.Errorf("ParseReservedConcurrency(%#v) = %v, want an error", bad, got)
		}
	}
}

// TestFeatureFlags checks that cdk.json sets every feature flag the
// aws-cdk-lib in go.mod currently recommends, at its recommended value:
// what `cdk init` writes for a new project (CURRENTLY_RECOMMENDED_FLAGS in
// its cx-api). The list is read from the library itself, the jsii bundle in
// the Go module cache, so a CDK upgrade that recommends a new flag fails
// here until cdk.json has it.
func TestFeatureFlags(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", "github.com/aws/aws-cdk-go/awscdk/v2").Output()
	if err != nil {
		t.Fatalf("go list awscdk: %v", err)
	}
	dir, version, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	tgz := filepath.Join(dir, "jsii", "aws-cdk-lib-"+strings.TrimPrefix(version, "v")+".tgz")
	lib := t.TempDir()
	extract(t, tgz, "package/cx-api/lib/", lib)
	script := `const f = require(process.argv[1]); process.stdout.write(JSON.stringify(f.CURRENTLY_RECOMMENDED_FLAGS));`
	raw, err := exec.Command("node", "-e", script, filepath.Join(lib, "package", "cx-api", "lib", "features.js")).Output()
	if err != nil {
		t.Fatalf("node reading the recommended flags: %v", err)
	}
	var recommended map[string]any
	if err := json.Unmarshal(raw, &recommended); err != nil {
		t.Fatal(err)
	}
	if len(recommended) < 50 {
		t.Fatalf("only %d recommended flags read from %s", len(recommended), tgz)
	}
	ctx := *cdkContext(t)
	for _, name := range slices.Sorted(maps.Keys(recommended)) {
		got, ok := ctx[name]
		if !ok {
			t.Errorf("cdk.json lacks %s (recommended: %v)", name, recommended[name])
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(recommended[name]) {
			t.Errorf("cdk.json sets %s = %v, recommended %v", name, got, recommended[name])
		}
	}
	t.Logf("aws-cdk-lib %s recommends %d flags; cdk.json sets them", version, len(recommended))
}

// extract writes the files under prefix of a .tgz into dir.
func extract(t *testing.T, tgz, prefix, dir string) {
	t.Helper()
	f, err := os.Open(tgz)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	n := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg || !strings.HasPrefix(h.Name, prefix) || strings.Contains(h.Name, "..") {
			continue
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("%s holds nothing under %s", tgz, prefix)
	}
}

// TestNagCatchesFindings shows that the packs stack.Nag applies are live:
// a queue that breaks AwsSolutions and Serverless rules, added without a
// suppression, is reported as an error by each pack.
func TestNagCatchesFindings(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack.Nag(app, false)
	st := awscdk.NewStack(app, jsii.String("nag-probe"), nil)
	awssqs.NewQueue(st, jsii.String("Plain"), &awssqs.QueueProps{Encryption: awssqs.QueueEncryption_UNENCRYPTED})
	ann := assertions.Annotations_FromStack(st)
	for _, rule := range []string{"AwsSolutions-SQS4", "Serverless-SQSRedrivePolicy"} {
		found := ann.FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String(rule+":.*")))
		if len(*found) == 0 {
			t.Errorf("%s: no error for a queue that breaks it", rule)
		}
	}
}

// tableTriggers counts the route table's own functions with a trigger of
// kind k.
func tableTriggers(k routes.TriggerKind) int {
	n := 0
	for _, name := range routes.Functions() {
		for _, tr := range routes.Config(name).Triggers {
			if tr.Kind == k {
				n++
			}
		}
	}
	return n
}
