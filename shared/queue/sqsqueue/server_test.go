package sqsqueue_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/queue/queuetest"
	"github.com/a2awire/a2awire/shared/queue/sqsqueue"
)

// serverEnv names the command of an SQS-compatible server to hold the
// queue to the conformance suite, started as `<command> -H 127.0.0.1 -p
// <port>` (moto's moto_server takes those flags). It is opt-in: no such
// server ships with the repository's tools, and the suite's waits are real
// (about 20 s). `make test-sqs` sets it to moto_server.
const serverEnv = "A2AWIRE_SQS_SERVER"

// TestConformanceOnSQSServer runs the queue conformance suite against
// sqsqueue talking to a real SQS-compatible server through the AWS SDK:
// the same suite the in-process queue passes, so what the harness models
// is what the SDK sees from a server.
func TestConformanceOnSQSServer(t *testing.T) {
	cmdName := os.Getenv(serverEnv)
	if cmdName == "" {
		t.Skipf("%s not set (make test-sqs runs this against moto_server)", serverEnv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(cmdName, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	// The server logs a line per request: kept in a file, shown on failure.
	logFile, err := os.Create(filepath.Join(t.TempDir(), "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmdName, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			if b, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("%s's log:\n%s", cmdName, b)
			}
		}
		_ = logFile.Close()
	})
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if r, err := http.Get(endpoint); err == nil {
			r.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer on %s within 30 s", cmdName, endpoint)
		}
		time.Sleep(200 * time.Millisecond)
	}
	client := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	n := 0
	queuetest.Run(t, func(t *testing.T, cfg queue.Config) queuetest.Pair {
		ctx := context.Background()
		n++
		dlq, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("conf-%d-dead", n)),
			Attributes: map[string]string{"VisibilityTimeout": strconv.Itoa(int(cfg.VisibilityTimeout / time.Second))}})
		if err != nil {
			t.Fatal(err)
		}
		attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatal(err)
		}
		q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("conf-%d", n)),
			Attributes: map[string]string{
				"VisibilityTimeout": strconv.Itoa(int(cfg.VisibilityTimeout / time.Second)),
				"RedrivePolicy":     fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, attrs.Attributes["QueueArn"], cfg.MaxReceiveCount),
			}})
		if err != nil {
			t.Fatal(err)
		}
		return queuetest.Pair{Queue: sqsqueue.New(client, *q.QueueUrl), DLQ: sqsqueue.New(client, *dlq.QueueUrl), Pass: time.Sleep}
	})
}
