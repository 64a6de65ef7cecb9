// Package sqsqueue is package queue's Queue over Amazon SQS
// (aws-sdk-go-v2's sqs client): a standard queue whose visibility timeout
// and redrive policy the deploy sets.
package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/routes"
)

// API is the part of *sqs.Client the queue calls.
type API interface {
	SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// Queue is one SQS queue.
type Queue struct {
	api API
	url string
}

// New returns the queue at url through api.
func New(api API, url string) *Queue { return &Queue{api: api, url: url} }

// FromEnv opens the queue named name from its URL variable (routes.QueueURLEnv) with
// the credentials Lambda sets (as dynamo.ClientFromEnv reads them, without
// config.LoadDefaultConfig's machinery); AWS_ENDPOINT_URL_SQS points it
// at another SQS-compatible server.
func FromEnv(getenv func(string) string, name string) (*Queue, error) {
	url := getenv(routes.QueueURLEnv(name))
	if url == "" {
		return nil, fmt.Errorf("sqsqueue: %s is not set", routes.QueueURLEnv(name))
	}
	region := getenv("AWS_REGION")
	if region == "" {
		return nil, errors.New("sqsqueue: AWS_REGION is not set")
	}
	var creds aws.CredentialsProvider
	switch {
	case getenv("AWS_ACCESS_KEY_ID") != "":
		creds = credentials.NewStaticCredentialsProvider(getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY"), getenv("AWS_SESSION_TOKEN"))
	case getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI") != "":
		creds = aws.NewCredentialsCache(endpointcreds.New(getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI"), func(o *endpointcreds.Options) {
			o.AuthorizationToken = getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN")
		}))
	default:
		return nil, errors.New("sqsqueue: no AWS credentials in the environment")
	}
	o := sqs.Options{Region: region, Credentials: creds}
	if ep := getenv("AWS_ENDPOINT_URL_SQS"); ep != "" {
		o.BaseEndpoint = aws.String(ep)
	}
	return New(sqs.New(o), url), nil
}

// seconds rounds d up to whole seconds, as SQS counts them.
func seconds(d time.Duration) int32 {
	return int32(math.Ceil(d.Seconds()))
}

// Send enqueues msgs, ten per SendMessageBatch; a message SQS refuses is
// an error naming it (the rest of its batch went out).
func (q *Queue) Send(ctx context.Context, msgs ...queue.Message) error {
	for len(msgs) > 0 {
		batch := msgs[:min(len(msgs), queue.MaxBatch)]
		msgs = msgs[len(batch):]
		in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.url)}
		for i, m := range batch {
			if m.Delay < 0 || m.Delay > queue.MaxDelay {
				return fmt.Errorf("sqsqueue: delay %s outside 0..%s", m.Delay, queue.MaxDelay)
			}
			in.Entries = append(in.Entries, types.SendMessageBatchRequestEntry{
				Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(m.Body), DelaySeconds: seconds(m.Delay),
			})
		}
		out, err := q.api.SendMessageBatch(ctx, in)
		if err != nil {
			return fmt.Errorf("sqsqueue: send: %w", err)
		}
		if len(out.Failed) > 0 {
			f := out.Failed[0]
			return fmt.Errorf("sqsqueue: send: %d of %d refused, first: %s %s", len(out.Failed), len(batch), aws.ToString(f.Code), aws.ToString(f.Message))
		}
	}
	return nil
}

// Receive is one ReceiveMessage (long-polling up to wait, whole seconds
// rounded down, at most SQS's 20).
func (q *Queue) Receive(ctx context.Context, max int, wait time.Duration) ([]queue.Received, error) {
	if max < 1 || max > queue.MaxBatch {
		return nil, fmt.Errorf("sqsqueue: receive of %d outside 1..%d", max, queue.MaxBatch)
	}
	out, err := q.api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(q.url),
		MaxNumberOfMessages:         int32(max),
		WaitTimeSeconds:             int32(min(wait, 20*time.Second) / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount, types.MessageSystemAttributeNameSentTimestamp},
	})
	if err != nil {
		return nil, fmt.Errorf("sqsqueue: receive: %w", err)
	}
	var rs []queue.Received
	for _, m := range out.Messages {
		n, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
		ms, _ := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64)
		rs = append(rs, queue.Received{ID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body), Receipt: aws.ToString(m.ReceiptHandle),
			ReceiveCount: n, SentAt: time.UnixMilli(ms).UTC()})
	}
	return rs, nil
}

// Delete is DeleteMessage.
func (q *Queue) Delete(ctx context.Context, receipt string) error {
	_, err := q.api.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q.url), ReceiptHandle: aws.String(receipt)})
	return receiptErr("delete", err)
}

// ChangeVisibility is ChangeMessageVisibility.
func (q *Queue) ChangeVisibility(ctx context.Context, receipt string, d time.Duration) error {
	if d < 0 || d > queue.MaxVisibility {
		return fmt.Errorf("sqsqueue: visibility %s outside 0..%s", d, queue.MaxVisibility)
	}
	_, err := q.api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(q.url), ReceiptHandle: aws.String(receipt), VisibilityTimeout: seconds(d),
	})
	return receiptErr("change visibility", err)
}

func receiptErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var invalid *types.ReceiptHandleIsInvalid
	var notInFlight *types.MessageNotInflight
	if errors.As(err, &invalid) || errors.As(err, &notInFlight) {
		return fmt.Errorf("sqsqueue: %s: %w (%v)", op, queue.ErrReceiptInvalid, err)
	}
	return fmt.Errorf("sqsqueue: %s: %w", op, err)
}
