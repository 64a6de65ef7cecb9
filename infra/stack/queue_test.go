package stack_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/infra/stack"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// checkQueues: the queue table's queues with their redrive policy to the
// dead-letter queue, each queue trigger's SQS mapping with partial batch
// responses and its maximum concurrency, and least-privilege grants: a
// sender may only send to its queues, a consumer only consume its own, no
// one else touches them, and no SQS action is granted on "*".
func checkQueues(t *testing.T, s *synthesized) {
	qid := map[string]string{}
	for _, q := range routes.Queues() {
		c, ok := s.stack.Queues[q.Name]
		if !ok {
			t.Fatalf("queue %s not deployed", q.Name)
		}
		qid[q.Name] = s.logicalID(t, c)
	}
	for _, q := range routes.Queues() {
		want := map[string]any{
			"VisibilityTimeout":      q.VisibilityTimeoutSeconds,
			"MessageRetentionPeriod": q.RetentionSeconds,
			"SqsManagedSseEnabled":   true,
		}
		if q.DeadLetter != "" {
			want["RedrivePolicy"] = map[string]any{
				"deadLetterTargetArn": map[string]any{"Fn::GetAtt": []any{qid[q.DeadLetter], "Arn"}},
				"maxReceiveCount":     q.MaxReceiveCount,
			}
		} else {
			want["RedrivePolicy"] = assertions.Match_Absent()
		}
		checkAssertion(t, "queue "+q.Name, func() {
			s.template.HasResourceProperties(jsii.String("AWS::SQS::Queue"), want)
		})
		if got := fmt.Sprint(s.resources[qid[q.Name]].Properties["VisibilityTimeout"]); got != fmt.Sprint(q.VisibilityTimeoutSeconds) {
			t.Errorf("queue %s: visibility %s", q.Name, got)
		}
	}
	// Who may do what on which queue, from the route table.
	sends, consumes := map[string][]string{}, map[string][]string{}
	for _, fn := range s.props.Functions {
		sends[fn.Name] = fn.Sends
		for _, tr := range fn.Triggers {
			if tr.Kind != routes.QueueTrigger {
				continue
			}
			consumes[fn.Name] = append(consumes[fn.Name], tr.Queue)
			fnID := s.logicalID(t, s.stack.Functions[fn.Name])
			var window any = assertions.Match_Absent()
			if tr.BatchWindowSeconds > 0 {
				window = tr.BatchWindowSeconds
			}
			checkAssertion(t, fn.Name+" queue mapping", func() {
				s.template.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
					"FunctionName":                   map[string]any{"Ref": fnID},
					"EventSourceArn":                 map[string]any{"Fn::GetAtt": []any{qid[tr.Queue], "Arn"}},
					"BatchSize":                      stack.QueueBatchSize(tr),
					"MaximumBatchingWindowInSeconds": window,
					"FunctionResponseTypes":          []any{"ReportBatchItemFailures"},
					"ScalingConfig":                  map[string]any{"MaximumConcurrency": stack.QueueConcurrency(tr)},
				})
			})
		}
	}
	if len(consumes["webhook-deliver"]) != 1 || len(consumes["webhook-deadletter"]) != 1 || !slices.Contains(sends["webhook-dispatcher"], routes.DeliveryQueue) {
		t.Fatalf("route table: deliver consumes %v, deadletter %v, dispatcher sends %v", consumes["webhook-deliver"], consumes["webhook-deadletter"], sends["webhook-dispatcher"])
	}
	if !slices.Equal(consumes["world-commit"], []string{routes.ActionQueue}) || !slices.Equal(sends["world-act"], []string{routes.ActionQueue}) {
		t.Fatalf("route table: world-commit consumes %v, world-act sends %v; want %s", consumes["world-commit"], sends["world-act"], routes.ActionQueue)
	}
	for _, fn := range s.props.Functions {
		role := s.logicalID(t, s.stack.Roles[fn.Name])
		got := map[string][]string{} // queue → actions
		for _, st := range s.policyStatements(role) {
			for _, a := range st.Actions {
				if !strings.HasPrefix(a, "sqs:") {
					continue
				}
				for _, r := range st.Resources {
					name := ""
					for q, id := range qid {
						if strings.Contains(fmt.Sprint(r), id) {
							name = q
						}
					}
					if name == "" {
						if fq, ok := s.stack.FailureQueues[fn.Name]; ok && strings.Contains(fmt.Sprint(r), s.logicalID(t, fq)) {
							continue // the stream's on-failure destination
						}
						t.Errorf("%s: %s on %v, not a queue of the table", fn.Name, a, r)
						continue
					}
					got[name] = append(got[name], a)
				}
			}
		}
		want := map[string][]string{}
		for _, q := range sends[fn.Name] {
			want[q] = append(want[q], "sqs:SendMessage")
		}
		for _, q := range consumes[fn.Name] {
			want[q] = append(want[q], "sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage")
		}
		for q := range qid {
			g, w := slices.Sorted(slices.Values(got[q])), slices.Sorted(slices.Values(want[q]))
			if !slices.Equal(g, w) {
				t.Errorf("%s on %s: %v, want %v", fn.Name, q, g, w)
			}
		}
		// The queues' URLs reach exactly the functions that use them.
		env, _ := s.resources[s.logicalID(t, s.stack.Functions[fn.Name])].Properties["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		for q, id := range qid {
			v, has := vars[routes.QueueURLEnv(q)]
			uses := len(want[q]) > 0
			if has != uses || has && fmt.Sprint(v) != fmt.Sprint(map[string]any{"Ref": id}) {
				t.Errorf("%s: %s = %v (uses the queue: %v)", fn.Name, routes.QueueURLEnv(q), v, uses)
			}
		}
	}
	for _, st := range s.allStatements() {
		for _, a := range st.Actions {
			if strings.HasPrefix(a, "sqs:") && slices.ContainsFunc(st.Resources, func(r any) bool { return r == "*" }) {
				t.Errorf("%s granted on *", a)
			}
		}
	}
}

// checkActionQueue: the queued world actions as written down for them,
// spelled out rather than read from the route table: world-commit's
// mapping gathers batches of up to 1000 for 1 s, two invocations at most,
// with partial batch responses; the queue moves an action to its
// dead-letter queue after 5 receives; world-act may send to it (and to no
// other queue) and knows its URL.
func checkActionQueue(t *testing.T, s *synthesized) {
	for _, name := range []string{"world-act", "world-commit"} {
		if _, ok := s.stack.Functions[name]; !ok {
			t.Fatalf("%s not deployed", name)
		}
	}
	queueID := s.logicalID(t, s.stack.Queues[routes.ActionQueue])
	deadID := s.logicalID(t, s.stack.Queues[routes.ActionDeadLetters])
	commitID := s.logicalID(t, s.stack.Functions["world-commit"])
	checkAssertion(t, "world-commit mapping", func() {
		s.template.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
			"FunctionName":                   map[string]any{"Ref": commitID},
			"EventSourceArn":                 map[string]any{"Fn::GetAtt": []any{queueID, "Arn"}},
			"BatchSize":                      1000,
			"MaximumBatchingWindowInSeconds": 1,
			"ScalingConfig":                  map[string]any{"MaximumConcurrency": 2},
			"FunctionResponseTypes":          []any{"ReportBatchItemFailures"},
		})
	})
	cfg, _ := routes.QueueConfig(routes.ActionQueue)
	checkAssertion(t, "world-actions queue", func() {
		s.template.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{
			"MessageRetentionPeriod": cfg.RetentionSeconds,
			"RedrivePolicy": map[string]any{
				"deadLetterTargetArn": map[string]any{"Fn::GetAtt": []any{deadID, "Arn"}},
				"maxReceiveCount":     5,
			},
		})
	})
	// Sends and URLs, by queue: world-act's on the action queue only.
	act := s.logicalID(t, s.stack.Roles["world-act"])
	var sendsTo []string
	for _, st := range s.policyStatements(act) {
		if slices.Contains(st.Actions, "sqs:SendMessage") {
			for _, r := range st.Resources {
				sendsTo = append(sendsTo, fmt.Sprint(r))
			}
		}
	}
	if want := fmt.Sprint(map[string]any{"Fn::GetAtt": []any{queueID, "Arn"}}); !slices.Equal(sendsTo, []string{want}) {
		t.Errorf("world-act may send to %v, want %s only", sendsTo, want)
	}
	env, _ := s.resources[s.logicalID(t, s.stack.Functions["world-act"])].Properties["Environment"].(map[string]any)
	vars, _ := env["Variables"].(map[string]any)
	if got := fmt.Sprint(vars["QUEUE_URL_WORLD_ACTIONS"]); got != fmt.Sprint(map[string]any{"Ref": queueID}) {
		t.Errorf("world-act: QUEUE_URL_WORLD_ACTIONS = %s", got)
	}
	if v, ok := vars["QUEUE_URL_WEBHOOK_DELIVERIES"]; ok {
		t.Errorf("world-act: QUEUE_URL_WEBHOOK_DELIVERIES = %v", v)
	}
}
