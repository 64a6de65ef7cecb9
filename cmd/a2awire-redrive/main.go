// Command a2awire-redrive re-drives the stream batches a stream-triggered
// function's event source mapping gave up on: it reads each failure record
// from the mapping's on-failure queue (the stack's
// StreamFailuresUrl<Function> output), reads those records back from the
// table's stream while the stream still holds them (24 hours from their
// commit), and hands them to the function's own handler, built in process
// from the same environment the function runs with. It prints what it
// re-drove and what it could not recover; those failure records stay in the
// queue. Exit status: 0 when everything was recovered, 1 when something was
// not, 2 on a usage or setup error.
//
//	TABLE_NAME=… QUEUE_URL_WEBHOOK_DELIVERIES=… AWS_REGION=… \
//	  a2awire-redrive -failures <StreamFailuresUrlWebhookDispatcher>
//
// See docs/webhooks.md ("When the stream gives up").
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/a2awire/a2awire/functions/webhook-dispatcher/dispatcher"
	"github.com/a2awire/a2awire/functions/world-deleter/deleter"
	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/function/lambdamain"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/queue/sqsqueue"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/streamredrive"
)

// builders are the stream-triggered functions it can re-drive.
var builders = map[string]function.Builder{
	dispatcher.Function: dispatcher.Build,
	"world-deleter":     deleter.Build,
}

// failuresQueue is the name under which the -failures URL is handed to
// sqsqueue.FromEnv.
const failuresQueue = "redrive-failures"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("a2awire-redrive", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fn := fs.String("function", dispatcher.Function, "the stream-triggered function whose given-up batches to re-drive")
	failures := fs.String("failures", "", "URL of the function's on-failure queue (stack output StreamFailuresUrl<Function>)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	b, ok := builders[*fn]
	if !ok || *failures == "" || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "a2awire-redrive: need -failures URL and -function one of %s, %s\n", dispatcher.Function, "world-deleter")
		return 2
	}
	env := func(k string) string {
		if k == routes.QueueURLEnv(failuresQueue) {
			return *failures
		}
		return getenv(k)
	}
	log := logging.New(stderr, logging.JSON, slog.LevelWarn)
	q, err := sqsqueue.FromEnv(env, failuresQueue)
	if err != nil {
		fmt.Fprintln(stderr, "a2awire-redrive:", err)
		return 2
	}
	db, err := dynamo.ClientFromEnv(env)
	if err != nil {
		fmt.Fprintln(stderr, "a2awire-redrive:", err)
		return 2
	}
	o := db.Options()
	so := dynamodbstreams.Options{Region: o.Region, Credentials: o.Credentials, BaseEndpoint: o.BaseEndpoint}
	if ep := env("AWS_ENDPOINT_URL_DYNAMODB_STREAMS"); ep != "" {
		so.BaseEndpoint = aws.String(ep)
	}
	h, err := lambdamain.Build(*fn, b, env, log, func() (store.Store, error) { return dynamo.FromEnv(env) })
	if err != nil {
		fmt.Fprintln(stderr, "a2awire-redrive: build", *fn+":", err)
		return 2
	}
	size := routes.DefaultStreamBatchSize
	for _, t := range routes.Config(*fn).Triggers {
		if t.Kind == routes.StreamTrigger && t.BatchSize > 0 {
			size = t.BatchSize
		}
	}
	r := &streamredrive.Redriver{Failures: q, Stream: &streamredrive.StreamsReader{API: dynamodbstreams.New(so)},
		Function: lambda.NewHandler(h), BatchSize: size}
	rep, err := r.Run(ctx)
	return report(stdout, stderr, rep, err)
}

// report prints rep and returns the exit status.
func report(stdout, stderr io.Writer, rep streamredrive.Report, err error) int {
	fmt.Fprintf(stdout, "failure records read: %d; re-driven whole: %d; records handed to the function: %d\n", rep.Batches, rep.Recovered, rep.Records)
	for _, l := range rep.Lost {
		fmt.Fprintf(stdout, "NOT RECOVERED: shard %q sequence %s..%s (%d records): %s\n", l.Batch.ShardID, l.Batch.StartSequenceNumber, l.Batch.EndSequenceNumber, l.Records, l.Why)
	}
	if err != nil {
		fmt.Fprintln(stderr, "a2awire-redrive:", err)
		return 2
	}
	if len(rep.Lost) > 0 {
		return 1
	}
	return 0
}
