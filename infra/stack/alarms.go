package stack

import (
	"fmt"
	"maps"
	"slices"

	"github.com/a2awire/a2awire/shared/routes"
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Alarm thresholds. Each alarm watches one signal of loss or of a caller
// turned away, over AlarmPeriodS, and notifies the alarm topic when it
// fires and when it clears. Missing data (no invocations, an empty queue)
// is not breaching: an idle network is a healthy one.
const (
	AlarmPeriodS = 300
	// FunctionErrorsThreshold: one failed invocation (a crash, a timeout,
	// an init failure) in a period. The handlers answer every expected
	// failure with a status code, so a Lambda error is a defect or an
	// outage, never a caller's mistake.
	FunctionErrorsThreshold = 1
	// FunctionThrottlesThreshold: one throttled invocation in a period. A
	// throttled route answers its caller with a gateway error, a throttled
	// stream batch is retried and holds its shard back. Without a
	// reservation, every function draws on the account's one pool, so one
	// alarm on the account's Throttles (all functions of the region) watches
	// them all, at a tenth of the cost of one per function; a function with
	// a reservation has its own pool, and its own alarm.
	FunctionThrottlesThreshold = 1
	// IteratorAgeThresholdMS: the stream's oldest unprocessed record is
	// five minutes old. Records older than the mapping's maximum record age
	// are given up (to the failure queue), so this fires well before loss.
	IteratorAgeThresholdMS = 5 * 60 * 1000
	// FailureQueueDepthThreshold: one record in a stream's on-failure
	// queue. Nothing reads those queues; each message is a batch that was
	// given up.
	FailureQueueDepthThreshold = 1
	// QueueAgeThresholdS: a message of a queue of the queue table has
	// waited fifteen minutes. The delivery queue's early retries wait in
	// it for at most five, and its dead-letter queue is drained as soon
	// as a message lands: a message this old means its consumer is failing.
	// The queued actions' dead-letter queue has no consumer: its alarm
	// fires fifteen minutes after an action the committer gave up on lands
	// there (SQS counts a dead letter's age from its move) and clears once
	// the action is redriven.
	QueueAgeThresholdS = 15 * 60
	// TableThrottlesThreshold: one throttled read or write of the table or
	// its indexes. On-demand tables throttle a hot partition, or traffic
	// past twice its previous peak.
	TableThrottlesThreshold = 1
	// APIServerErrorsThreshold: five 5xx answers of the API in a period:
	// function failures and timeouts seen from the caller's side, and
	// throttled integrations.
	APIServerErrorsThreshold = 5
)

// addMonitoring adds the alarm topic (with an email subscription when
// alarmEmail is set), one alarm per signal and the dashboard.
func (s *Stack) addMonitoring(p Props) {
	scope := constructs.NewConstruct(s.Stack, jsii.String("Monitoring"))
	s.AlarmTopic = awssns.NewTopic(scope, jsii.String("AlarmTopic"), &awssns.TopicProps{
		DisplayName: jsii.String("a2awire " + s.Stage + " alarms"),
		EnforceSSL:  jsii.Bool(true),
	})
	// The topic's policy (written for EnforceSSL) replaces SNS's default
	// one, which let the account's own services publish: without this
	// statement CloudWatch's alarm actions are refused.
	s.AlarmTopic.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Effect:     awsiam.Effect_ALLOW,
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)},
		Actions:    jsii.Strings("sns:Publish"),
		Resources:  &[]*string{s.AlarmTopic.TopicArn()},
		Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": s.Account()}},
	}))
	if p.AlarmEmail != "" {
		sub := awssns.NewSubscription(scope, jsii.String("AlarmEmail"), &awssns.SubscriptionProps{
			Topic:    s.AlarmTopic,
			Protocol: awssns.SubscriptionProtocol_EMAIL,
			Endpoint: jsii.String(p.AlarmEmail),
		})
		suppress(sub, nagAlarmEmailRedrive)
	}
	s.Alarms = map[string]awscloudwatch.Alarm{}
	period := awscdk.Duration_Seconds(jsii.Number(AlarmPeriodS))
	sum := &awscloudwatch.MetricOptions{Period: period, Statistic: jsii.String("Sum")}

	var errors, throttles, ages []awscloudwatch.IMetric
	for _, fn := range p.Functions {
		f := s.Functions[fn.Name]
		e, th := f.MetricErrors(sum), f.MetricThrottles(sum)
		errors, throttles = append(errors, e), append(throttles, th)
		s.alarm(scope, fn.Name+"-Errors", e, FunctionErrorsThreshold,
			fmt.Sprintf("%s failed (crash, timeout or init failure) at least %d time(s) in %d s", fn.Name, FunctionErrorsThreshold, AlarmPeriodS))
		if _, ok := s.Reserved[fn.Name]; ok {
			s.alarm(scope, fn.Name+"-Throttles", th, FunctionThrottlesThreshold,
				fmt.Sprintf("%s was throttled at its reservation at least %d time(s) in %d s: raise its reservation", fn.Name, FunctionThrottlesThreshold, AlarmPeriodS))
		}
		if slices.ContainsFunc(fn.Triggers, func(tr routes.Trigger) bool { return tr.Kind == routes.StreamTrigger }) {
			age := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
				Namespace: jsii.String("AWS/Lambda"), MetricName: jsii.String("IteratorAge"),
				DimensionsMap: &map[string]*string{"FunctionName": f.FunctionName()},
				Period:        period, Statistic: jsii.String("Maximum"),
			})
			ages = append(ages, age)
			s.alarm(scope, fn.Name+"-IteratorAge", age, IteratorAgeThresholdMS,
				fmt.Sprintf("%s is behind the table's stream: its oldest record waits %d min or more", fn.Name, IteratorAgeThresholdMS/60000))
		}
	}
	s.alarm(scope, "AccountThrottles", awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace: jsii.String("AWS/Lambda"), MetricName: jsii.String("Throttles"), Period: period, Statistic: jsii.String("Sum"),
	}), FunctionThrottlesThreshold, fmt.Sprintf("Lambda throttled at least %d invocation(s) of the account in %d s (the dashboard shows which "+
		"function): raise the account's concurrency quota, or a reservation", FunctionThrottlesThreshold, AlarmPeriodS))
	var depths []awscloudwatch.IMetric
	for _, name := range slices.Sorted(maps.Keys(s.FailureQueues)) {
		m := s.FailureQueues[name].MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: period, Statistic: jsii.String("Maximum")})
		depths = append(depths, m)
		s.alarm(scope, name+"-StreamFailures", m, FailureQueueDepthThreshold,
			fmt.Sprintf("%s gave up a stream batch (its on-failure queue holds records): the records are in the queue for %d days", name, FailureRetentionDays))
	}
	for _, name := range slices.Sorted(maps.Keys(s.Queues)) {
		m := s.Queues[name].MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Period: period, Statistic: jsii.String("Maximum")})
		depths = append(depths, m)
		s.alarm(scope, "Queue-"+name+"-Age", m, QueueAgeThresholdS,
			fmt.Sprintf("a message of queue %s has waited %d min or more: its consumer is failing", name, QueueAgeThresholdS/60))
	}
	tableThrottles := s.tableThrottles(p, period)
	s.alarm(scope, "TableThrottles", tableThrottles, TableThrottlesThreshold,
		"the table or an index throttled reads or writes (a hot partition, or traffic past twice its previous peak)")
	api5xx := s.API.MetricServerError(sum)
	s.alarm(scope, "Api5xx", api5xx, APIServerErrorsThreshold,
		fmt.Sprintf("the HTTP API answered %d or more 5xx in %d s", APIServerErrorsThreshold, AlarmPeriodS))

	s.Dashboard = awscloudwatch.NewDashboard(scope, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(Name(s.Stage)),
		Widgets: &[]*[]awscloudwatch.IWidget{
			{graph("API requests and errors", s.API.MetricCount(sum), s.API.MetricClientError(sum), api5xx),
				graph("API latency p99 (ms)", s.API.MetricLatency(&awscloudwatch.MetricOptions{Period: period, Statistic: jsii.String("p99")}))},
			{graph("Function errors", errors...), graph("Function throttles", throttles...)},
			{graph("Stream iterator age (ms)", ages...), graph("Failure queue depth, queue age (s)", depths...)},
			{graph("Table throttles", tableThrottles)},
		},
	})
}

// alarm adds one alarm on m at threshold (greater or equal) that notifies
// the alarm topic when it fires and when it clears.
func (s *Stack) alarm(scope constructs.Construct, id string, m awscloudwatch.IMetric, threshold float64, description string) {
	a := awscloudwatch.NewAlarm(scope, jsii.String(id), &awscloudwatch.AlarmProps{
		Metric:             m,
		Threshold:          jsii.Number(threshold),
		EvaluationPeriods:  jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		AlarmDescription:   jsii.String("a2awire " + s.Stage + ": " + description),
	})
	action := &topicAction{topic: s.AlarmTopic}
	a.AddAlarmAction(action)
	a.AddOkAction(action)
	s.Alarms[id] = a
}

// tableThrottles is the sum of the table's and its indexes' read and write
// throttle events.
func (s *Stack) tableThrottles(p Props, period awscdk.Duration) awscloudwatch.IMetric {
	using := map[string]awscloudwatch.IMetric{}
	add := func(dims map[string]*string) {
		for _, name := range []string{"ReadThrottleEvents", "WriteThrottleEvents"} {
			using[fmt.Sprintf("m%d", len(using))] = awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
				Namespace: jsii.String("AWS/DynamoDB"), MetricName: jsii.String(name), DimensionsMap: &dims,
				Period: period, Statistic: jsii.String("Sum"),
			})
		}
	}
	add(map[string]*string{"TableName": s.Table.TableName()})
	for _, idx := range p.Table.Indexes {
		add(map[string]*string{"TableName": s.Table.TableName(), "GlobalSecondaryIndexName": jsii.String(idx.Name)})
	}
	expr := ""
	for _, id := range slices.Sorted(maps.Keys(using)) {
		if expr != "" {
			expr += " + "
		}
		// FILL: a period with no throttle is no datapoint, not a gap
		// that would blank the whole sum.
		expr += "FILL(" + id + ", 0)"
	}
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String(expr), UsingMetrics: &using, Period: period, Label: jsii.String("table throttle events"),
	})
}

func graph(title string, ms ...awscloudwatch.IMetric) awscloudwatch.IWidget {
	return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
		Title: jsii.String(title), Left: &ms, Width: jsii.Number(12), Height: jsii.Number(6),
	})
}

// topicAction is an alarm action that publishes to an SNS topic: what
// aws-cloudwatch-actions' SnsAction does, without compiling that module
// (and the modules it pulls in) into this one for one ARN.
type topicAction struct{ topic awssns.Topic }

// Bind names the topic as the alarm's action.
func (a *topicAction) Bind(constructs.Construct, awscloudwatch.IAlarm) *awscloudwatch.AlarmActionConfig {
	return &awscloudwatch.AlarmActionConfig{AlarmActionArn: a.topic.TopicArn()}
}
