package sqsqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/queue/sqsqueue"
)

// fakeAPI records the requests the queue makes of SQS.
type fakeAPI struct {
	batches [][]types.SendMessageBatchRequestEntry
	recv    *sqs.ReceiveMessageInput
	vis     int32
	fail    error
}

func (f *fakeAPI) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.batches = append(f.batches, in.Entries)
	return &sqs.SendMessageBatchOutput{}, nil
}

func (f *fakeAPI) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.recv = in
	return &sqs.ReceiveMessageOutput{Messages: []types.Message{{MessageId: aws.String("m1"), Body: aws.String("b"), ReceiptHandle: aws.String("r1"),
		Attributes: map[string]string{"ApproximateReceiveCount": "3", "SentTimestamp": "1700000000000"}}}}, nil
}

func (f *fakeAPI) DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	return &sqs.DeleteMessageOutput{}, f.fail
}

func (f *fakeAPI) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	f.vis = in.VisibilityTimeout
	return &sqs.ChangeMessageVisibilityOutput{}, f.fail
}

// TestRequests: sends go out ten to a SendMessageBatch with delays in
// whole seconds rounded up; a receive asks for the receive count and send
// time and reads them; an invalid receipt is queue.ErrReceiptInvalid.
func TestRequests(t *testing.T) {
	f := &fakeAPI{}
	q := sqsqueue.New(f, "https://sqs.example/q")
	var msgs []queue.Message
	for range 12 {
		msgs = append(msgs, queue.Message{Body: "x", Delay: 1500 * time.Millisecond})
	}
	if err := q.Send(t.Context(), msgs...); err != nil {
		t.Fatal(err)
	}
	if len(f.batches) != 2 || len(f.batches[0]) != 10 || len(f.batches[1]) != 2 || f.batches[0][0].DelaySeconds != 2 {
		t.Fatalf("batches %d, first %d entries with delay %d s", len(f.batches), len(f.batches[0]), f.batches[0][0].DelaySeconds)
	}
	if err := q.Send(t.Context(), queue.Message{Body: "x", Delay: queue.MaxDelay + time.Second}); err == nil {
		t.Error("a delay past 15 min was sent")
	}
	got, err := q.Receive(t.Context(), 10, 30*time.Second)
	if err != nil || len(got) != 1 || got[0].ReceiveCount != 3 || got[0].Receipt != "r1" || got[0].SentAt.UnixMilli() != 1700000000000 {
		t.Fatalf("Receive: %+v %v", got, err)
	}
	if f.recv.WaitTimeSeconds != 20 || f.recv.MaxNumberOfMessages != 10 || len(f.recv.MessageSystemAttributeNames) != 2 {
		t.Errorf("ReceiveMessage input %+v", f.recv)
	}
	if err := q.ChangeVisibility(t.Context(), "r1", 300*time.Second); err != nil || f.vis != 300 {
		t.Errorf("ChangeVisibility: %v, %d s", err, f.vis)
	}
	f.fail = &types.ReceiptHandleIsInvalid{Message: aws.String("gone")}
	if err := q.Delete(t.Context(), "r0"); !errors.Is(err, queue.ErrReceiptInvalid) {
		t.Errorf("Delete of an invalid receipt: %v", err)
	}
}
