package stack_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/infra/stack"
	"github.com/a2awire/a2awire/shared/routes"
)

// checkNoReservation: without reservedConcurrency no function reserves
// any, so the stack deploys on a new account's quota.
func checkNoReservation(t *testing.T, s *synthesized) {
	if len(s.props.ReservedConcurrency) != 0 {
		t.Fatalf("the test asked for reservations %v", s.props.ReservedConcurrency)
	}
	for id, r := range s.ofType("AWS::Lambda::Function") {
		if v, ok := r.Properties["ReservedConcurrentExecutions"]; ok {
			t.Errorf("function %s reserves %v", id, v)
		}
	}
	if plan := stack.PlanConcurrency(s.props); plan.Total != 0 || plan.RequiredQuota != stack.MinUnreservedConcurrency {
		t.Errorf("plan %+v, want nothing reserved", plan)
	}
}

// checkMonitoring: an alarm per function on errors and on throttles, one on
// each stream function's iterator age, on each failure queue's depth, on
// the age of each queue of the queue table (the webhook dead-letter queue
// included), on the table's throttles and on the API's 5xx, each notifying
// the alarm topic when it fires and when it clears; the topic allows
// CloudWatch to publish; a dashboard.
func checkMonitoring(t *testing.T, s *synthesized) {
	topicID := s.logicalID(t, s.stack.AlarmTopic)
	alarms := s.ofType("AWS::CloudWatch::Alarm")
	byMetric := map[string]int{}
	for id, a := range alarms {
		p := a.Properties
		for _, key := range []string{"AlarmActions", "OKActions"} {
			if got := fmt.Sprint(p[key]); !strings.Contains(got, topicID) {
				t.Errorf("alarm %s: %s %s, not the alarm topic", id, key, got)
			}
		}
		if p["TreatMissingData"] != "notBreaching" || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" {
			t.Errorf("alarm %s: %v %v", id, p["TreatMissingData"], p["ComparisonOperator"])
		}
		name, _ := p["MetricName"].(string)
		if name == "" {
			name = "expression" // the table's throttles: a sum over metrics
		}
		byMetric[name]++
	}
	streams := 0
	for _, fn := range s.props.Functions {
		if hasTrigger(fn, routes.StreamTrigger) {
			streams++
		}
	}
	// Throttles: one on the account's pool, one per reservation.
	want := map[string]int{
		"Errors": len(s.props.Functions), "Throttles": 1 + len(stack.PlanConcurrency(s.props).Reserved), "IteratorAge": streams,
		"ApproximateNumberOfMessagesVisible": len(s.stack.FailureQueues),
		"ApproximateAgeOfOldestMessage":      len(routes.Queues()),
		"expression":                         1, "5xx": 1,
	}
	for metric, n := range want {
		if byMetric[metric] != n {
			t.Errorf("%d alarms on %s, want %d", byMetric[metric], metric, n)
		}
	}
	if len(alarms) != len(s.stack.Alarms) {
		t.Errorf("%d alarms in the template, %d made", len(alarms), len(s.stack.Alarms))
	}
	t.Logf("%d alarms %v", len(alarms), byMetric)
	// Thresholds, as documented.
	for id, threshold := range map[string]float64{
		"TableThrottles": stack.TableThrottlesThreshold, "Api5xx": stack.APIServerErrorsThreshold,
		"Queue-" + routes.DeliveryDeadLetters + "-Age": stack.QueueAgeThresholdS,
		"Queue-" + routes.ActionDeadLetters + "-Age":   stack.QueueAgeThresholdS,
	} {
		a, ok := s.stack.Alarms[id]
		if !ok {
			t.Errorf("no alarm %s", id)
			continue
		}
		if got := s.resources[s.logicalID(t, a)].Properties["Threshold"]; got != threshold {
			t.Errorf("alarm %s: threshold %v, want %v", id, got, threshold)
		}
	}
	raw, _ := json.Marshal(s.resources[s.logicalID(t, s.stack.Alarms["TableThrottles"])].Properties["Metrics"])
	for _, m := range []string{"ReadThrottleEvents", "WriteThrottleEvents", "GlobalSecondaryIndexName"} {
		if !strings.Contains(string(raw), m) {
			t.Errorf("table throttle alarm does not sum %s: %s", m, raw)
		}
	}
	// CloudWatch may publish to the topic (its policy replaced SNS's
	// default), and only over TLS.
	var allowsCloudWatch, deniesPlain bool
	for _, pol := range s.ofType("AWS::SNS::TopicPolicy") {
		b, _ := json.Marshal(pol.Properties)
		if !strings.Contains(string(b), topicID) {
			continue
		}
		allowsCloudWatch = strings.Contains(string(b), `"cloudwatch.amazonaws.com"`) && strings.Contains(string(b), "aws:SourceAccount")
		deniesPlain = strings.Contains(string(b), `"aws:SecureTransport":"false"`)
	}
	if !allowsCloudWatch || !deniesPlain {
		t.Errorf("topic policy: CloudWatch allowed %v, plain HTTP denied %v", allowsCloudWatch, deniesPlain)
	}
	subs := s.ofType("AWS::SNS::Subscription")
	switch {
	case s.props.AlarmEmail == "" && len(subs) != 0:
		t.Errorf("subscriptions %v without alarmEmail", subs)
	case s.props.AlarmEmail != "":
		ok := false
		for _, sub := range subs {
			ok = ok || sub.Properties["Protocol"] == "email" && sub.Properties["Endpoint"] == s.props.AlarmEmail &&
				strings.Contains(fmt.Sprint(sub.Properties["TopicArn"]), topicID)
		}
		if !ok {
			t.Errorf("no email subscription of %s to the alarm topic: %v", s.props.AlarmEmail, subs)
		}
	}
	dashboards := s.ofType("AWS::CloudWatch::Dashboard")
	if len(dashboards) != 1 {
		t.Errorf("%d dashboards, want 1", len(dashboards))
	}
	for id, d := range dashboards {
		// CloudFormation's schema for a dashboard has no Tags (cfn-lint E3002).
		if tags, ok := d.Properties["Tags"]; ok {
			t.Errorf("dashboard %s has Tags %v", id, tags)
		}
	}
}

// checkDeploySettings: the scheduled functions are not retried by Lambda;
// the custom resources answer within their service timeout; the access
// log's destination is the log group's ARN without ":*"; the granted
// actions are only the ones the code calls.
func checkDeploySettings(t *testing.T, s *synthesized) {
	configs := map[string]resource{}
	for _, c := range s.ofType("AWS::Lambda::EventInvokeConfig") {
		configs[fmt.Sprint(c.Properties["FunctionName"])] = c
	}
	scheduled := 0
	for _, fn := range s.props.Functions {
		c, ok := configs[fmt.Sprint(map[string]any{"Ref": s.logicalID(t, s.stack.Functions[fn.Name])})]
		if !hasTrigger(fn, routes.ScheduleTrigger) {
			if ok {
				t.Errorf("%s: an EventInvokeConfig but no schedule", fn.Name)
			}
			continue
		}
		scheduled++
		if !ok || c.Properties["MaximumRetryAttempts"] != 0.0 || c.Properties["MaximumEventAgeInSeconds"] != float64(stack.ScheduleMaxEventAgeS) {
			t.Errorf("%s: EventInvokeConfig %v, want 0 retries and %d s", fn.Name, c.Properties, stack.ScheduleMaxEventAgeS)
		}
	}
	if scheduled == 0 {
		t.Errorf("no scheduled function to check")
	}
	for typ, r := range s.resources {
		if !strings.HasPrefix(r.Type, "Custom::") && r.Type != "AWS::CloudFormation::CustomResource" {
			continue
		}
		if got := r.Properties["ServiceTimeout"]; got != fmt.Sprint(stack.SeedServiceTimeoutS) && got != float64(stack.SeedServiceTimeoutS) {
			t.Errorf("custom resource %s: ServiceTimeout %v, want %d (CloudFormation's default is an hour)", typ, got, stack.SeedServiceTimeoutS)
		}
	}
	for id, st := range s.ofType("AWS::ApiGatewayV2::Stage") {
		dest, _ := json.Marshal(st.Properties["AccessLogSettings"].(map[string]any)["DestinationArn"])
		if strings.Contains(string(dest), ":*") || !strings.Contains(string(dest), ":log-group:") {
			t.Errorf("stage %s: access log destination %s, want arn:…:log-group:<name> without :*", id, dest)
		}
	}
	for _, st := range s.allStatements() {
		for _, a := range st.Actions {
			if slices.Contains(unusedActions, a) {
				t.Errorf("%s is granted but never called", a)
			}
		}
	}
}

// TestFunctionClass: the classes reservations are given by, and the
// functions that have none (a schedule's run, the deploy's registration).
func TestFunctionClass(t *testing.T) {
	rs := routes.All()
	for name, want := range map[string]string{
		"fixture-ledger": "fixture", "world-events": "world", "world-webhook-set": "world", "agent-worlds": "agent",
		"registry": "registry", "webhook-deliver": "webhook", "webhook-dispatcher": "webhook", "world-deleter": "world",
		"webhook-retry": "", "registry-seed": "",
	} {
		if got := stack.FunctionClass(routes.Config(name), rs); got != want {
			t.Errorf("%s: class %q, want %q", name, got, want)
		}
	}
}

// TestSigningKeyReference: the context value's two forms and the dynamic
// reference each becomes.
func TestSigningKeyReference(t *testing.T) {
	for spec, want := range map[string]string{
		"a2awire/key":                         "{{resolve:secretsmanager:a2awire/key:SecretString}}",
		"a2awire/key:SecretString:seed":       "{{resolve:secretsmanager:a2awire/key:SecretString:seed}}",
		"a2awire/key:SecretString":            "{{resolve:secretsmanager:a2awire/key:SecretString}}",
		"a2awire/key:SecretString:seed::v-id": "{{resolve:secretsmanager:a2awire/key:SecretString:seed::v-id}}",
		"arn:aws:secretsmanager:eu-west-1:123456789012:secret:a2awire/key-AbCdEf:SecretString:seed": "{{resolve:secretsmanager:arn:aws:secretsmanager:eu-west-1:123456789012:secret:a2awire/key-AbCdEf:SecretString:seed}}",
	} {
		if _, _, err := stack.ParseSigningKeySecret(spec); err != nil {
			t.Errorf("%s: %v", spec, err)
		}
		if got := stack.SigningKeyReference(spec); got != want {
			t.Errorf("%s: %s, want %s", spec, got, want)
		}
	}
	for _, bad := range []string{"", ":SecretString:seed", "k:SecretString:a:b:c:d", "k ey", "k:SecretString::x"} {
		if _, _, err := stack.ParseSigningKeySecret(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
