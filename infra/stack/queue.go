package stack

import (
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// SQS limits the queue table and queue triggers are checked against.
// A queue trigger's batch is at most MaxQueueBatchSize messages (SQS's
// most per receive) without a batching window, and at most
// MaxQueueWindowBatchSize with a window of at least 1 s (Lambda's rule for
// standard queues: the mapping then receives until the batch is full, the
// window ends or the event reaches 6 MB); the window is at most
// MaxQueueBatchWindowS.
const (
	MaxQueueBatchSize       = 10
	MaxQueueWindowBatchSize = 10000
	MaxQueueBatchWindowS    = 300
	MinQueueConcurrency     = 2
	MaxQueueConcurrency     = 1000
	MaxQueueVisibilityS     = 12 * 3600
	MaxQueueRetentionS      = 14 * 24 * 3600
	MinQueueRetentionS      = 60
	MaxQueueReceiveCount    = 1000
	queueConstructPrefix    = "Queue-"
)

// Actions on a queue. A sender may only send; a queue trigger's function
// (whose role Lambda's poller uses) may receive, delete, read the queue's
// attributes and change a message's visibility (how a delivery's early
// retry waits in the queue), on its own queue only.
var (
	sendActions    = []string{"sqs:SendMessage"}
	consumeActions = []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility"}
)

// queueTable is props' queue table: its own or the route table's.
func queueTable(p Props) []routes.Queue {
	if p.Queues != nil {
		return p.Queues
	}
	return routes.Queues()
}

// addQueues creates the queue table's queues, each dead-letter queue
// before the queues that redrive to it.
func (s *Stack) addQueues(qs []routes.Queue, prod bool) {
	removal := awscdk.RemovalPolicy_DESTROY
	if prod {
		removal = awscdk.RemovalPolicy_RETAIN
	}
	var add func(q routes.Queue) awssqs.Queue
	add = func(q routes.Queue) awssqs.Queue {
		if made, ok := s.Queues[q.Name]; ok {
			return made
		}
		props := &awssqs.QueueProps{
			VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(float64(q.VisibilityTimeoutSeconds))),
			RetentionPeriod:   awscdk.Duration_Seconds(jsii.Number(float64(q.RetentionSeconds))),
			Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
			EnforceSSL:        jsii.Bool(true),
			RemovalPolicy:     removal,
		}
		for _, dl := range qs {
			if dl.Name == q.DeadLetter {
				props.DeadLetterQueue = &awssqs.DeadLetterQueue{Queue: add(dl), MaxReceiveCount: jsii.Number(float64(q.MaxReceiveCount))}
			}
		}
		made := awssqs.NewQueue(s.Stack, jsii.String(queueConstructPrefix+q.Name), props)
		if isDeadLetter(qs, q.Name) {
			suppress(made, nagQueueIsDLQ...)
		}
		s.Queues[q.Name] = made
		return made
	}
	for _, q := range qs {
		add(q)
	}
}

func isDeadLetter(qs []routes.Queue, name string) bool {
	for _, q := range qs {
		if q.DeadLetter == name {
			return true
		}
	}
	return false
}

// grantSends gives fn the URL of each queue it sends to and sqs:SendMessage
// on that queue alone.
func (s *Stack) grantSends(fn routes.Function, env map[string]*string, role awsiam.Role) {
	for _, name := range fn.Sends {
		q := s.Queues[name]
		env[routes.QueueURLEnv(name)] = q.QueueUrl()
		role.AddToPolicy(allow(sendActions, []*string{q.QueueArn()}))
	}
}

// grantConsume gives a queue trigger's function the queue's URL and the
// actions Lambda's poller and the function need on that queue alone. It
// writes the grant itself rather than through SqsEventSource, which adds
// wider actions.
func (s *Stack) grantConsume(tr routes.Trigger, role awsiam.Role, env map[string]*string) {
	q := s.Queues[tr.Queue]
	role.AddToPolicy(allow(consumeActions, []*string{q.QueueArn()}))
	env[routes.QueueURLEnv(tr.Queue)] = q.QueueUrl()
}

// addQueueTrigger feeds the function from its queue: Lambda's SQS event
// source mapping with the trigger's batch size, batching window, partial
// batch responses and maximum concurrency.
func (s *Stack) addQueueTrigger(scope constructs.Construct, tr routes.Trigger, f awslambda.Function) {
	q := s.Queues[tr.Queue]
	props := &awslambda.EventSourceMappingProps{
		Target:                  f,
		EventSourceArn:          q.QueueArn(),
		BatchSize:               jsii.Number(float64(QueueBatchSize(tr))),
		ReportBatchItemFailures: jsii.Bool(tr.ReportBatchItemFailures),
		MaxConcurrency:          jsii.Number(float64(QueueConcurrency(tr))),
	}
	if tr.BatchWindowSeconds > 0 {
		props.MaxBatchingWindow = awscdk.Duration_Seconds(jsii.Number(float64(tr.BatchWindowSeconds)))
	}
	m := awslambda.NewEventSourceMapping(scope, jsii.String("Queue-"+tr.Queue), props)
	suppress(m, nagQueueMappingDestination)
}

// QueueBatchSize and QueueConcurrency are a queue trigger's deployed
// settings: its own, or the route table's defaults when unset.
func QueueBatchSize(tr routes.Trigger) int {
	if tr.BatchSize == 0 {
		return routes.DefaultQueueBatchSize
	}
	return tr.BatchSize
}

// QueueConcurrency is the trigger's maximum concurrency as deployed.
func QueueConcurrency(tr routes.Trigger) int {
	if tr.MaxConcurrency == 0 {
		return routes.DefaultQueueConcurrency
	}
	return tr.MaxConcurrency
}

// validateQueues checks the queue table and the functions' use of it.
func validateQueues(p Props, fail func(string, ...any)) {
	qs := queueTable(p)
	byName := map[string]routes.Queue{}
	for _, q := range qs {
		if _, dup := byName[q.Name]; dup || q.Name == "" {
			fail("queue %q: empty or listed twice", q.Name)
		}
		byName[q.Name] = q
	}
	for _, q := range qs {
		if q.VisibilityTimeoutSeconds < 0 || q.VisibilityTimeoutSeconds > MaxQueueVisibilityS {
			fail("queue %q: visibility timeout %d s outside 0..%d", q.Name, q.VisibilityTimeoutSeconds, MaxQueueVisibilityS)
		}
		if q.RetentionSeconds < MinQueueRetentionS || q.RetentionSeconds > MaxQueueRetentionS {
			fail("queue %q: retention %d s outside %d..%d", q.Name, q.RetentionSeconds, MinQueueRetentionS, MaxQueueRetentionS)
		}
		if (q.DeadLetter == "") != (q.MaxReceiveCount == 0) {
			fail("queue %q: a dead-letter queue and a maxReceiveCount go together", q.Name)
		}
		if q.MaxReceiveCount < 0 || q.MaxReceiveCount > MaxQueueReceiveCount {
			fail("queue %q: maxReceiveCount %d outside 1..%d", q.Name, q.MaxReceiveCount, MaxQueueReceiveCount)
		}
		if dl, ok := byName[q.DeadLetter]; q.DeadLetter != "" && (!ok || dl.DeadLetter != "") {
			fail("queue %q: dead-letter queue %q is not a queue of the table without one of its own", q.Name, q.DeadLetter)
		}
	}
	for _, fn := range p.Functions {
		for _, name := range fn.Sends {
			if _, ok := byName[name]; !ok {
				fail("function %q sends to %q, not a queue of the table", fn.Name, name)
			}
		}
		for _, tr := range fn.Triggers {
			if tr.Kind != routes.QueueTrigger {
				continue
			}
			q, ok := byName[tr.Queue]
			if !ok {
				fail("function %q: queue trigger on %q, not a queue of the table", fn.Name, tr.Queue)
				continue
			}
			if w := tr.BatchWindowSeconds; w < 0 || w > MaxQueueBatchWindowS {
				fail("function %q: queue batch window %d s outside 0..%d", fn.Name, w, MaxQueueBatchWindowS)
			}
			// Lambda refuses a batch over one receive's worth unless a
			// window of at least 1 s lets the mapping gather it.
			maxBatch := MaxQueueBatchSize
			if tr.BatchWindowSeconds >= 1 {
				maxBatch = MaxQueueWindowBatchSize
			}
			if tr.BatchSize < 0 || tr.BatchSize > maxBatch {
				fail("function %q: queue batch size %d outside 1..%d with a batch window of %d s (over %d needs a window of at least 1 s)",
					fn.Name, tr.BatchSize, maxBatch, tr.BatchWindowSeconds, MaxQueueBatchSize)
			}
			if c := tr.MaxConcurrency; c != 0 && (c < MinQueueConcurrency || c > MaxQueueConcurrency) {
				fail("function %q: queue concurrency %d outside %d..%d", fn.Name, c, MinQueueConcurrency, MaxQueueConcurrency)
			}
			// Lambda refuses a mapping whose queue hides a message for
			// less time than the function may run.
			if q.VisibilityTimeoutSeconds < fn.TimeoutSeconds {
				fail("function %q: queue %q's visibility timeout %d s is under the function's timeout %d s", fn.Name, q.Name, q.VisibilityTimeoutSeconds, fn.TimeoutSeconds)
			}
			if len(tr.Filters) > 0 {
				fail("function %q: queue triggers take no filters here", fn.Name)
			}
		}
	}
}

// queueReservation is the reserved concurrency a function's queue trigger
// needs: its maximum concurrency, which Lambda's poller would otherwise
// try to reach and be throttled at.
func queueReservation(fn routes.Function) int {
	n := 0
	for _, tr := range fn.Triggers {
		if tr.Kind == routes.QueueTrigger {
			n = max(n, QueueConcurrency(tr))
		}
	}
	return n
}
