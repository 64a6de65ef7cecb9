package streamredrive

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/a2awire/a2awire/shared/store/dynamo/dynamostream"
)

// StreamsAPI is what StreamsReader calls (*dynamodbstreams.Client).
type StreamsAPI interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// StreamsReader reads batches back from a DynamoDB stream (AWS, or
// DynamoDB Local's).
type StreamsReader struct {
	API StreamsAPI
	// StreamArn is used when a failure record names none.
	StreamArn string
	// MaxCalls bounds the GetRecords calls of one range (0: 1,000): an
	// open shard's iterator never runs out, so a range whose last record
	// never shows is given up on.
	MaxCalls int
}

// ReadRange reads b's records: from b.StartSequenceNumber (AT_SEQUENCE_NUMBER)
// through b.EndSequenceNumber of its shard. A failure record without a
// shard (or naming one the stream does not list) has its shard found by
// the sequence range. ErrGone when the stream no longer holds the start.
func (s *StreamsReader) ReadRange(ctx context.Context, b BatchInfo) ([]events.DynamoDBEventRecord, error) {
	arn := b.StreamArn
	if arn == "" {
		arn = s.StreamArn
	}
	shard, err := s.findShard(ctx, arn, b)
	if err != nil {
		return nil, err
	}
	it, err := s.API.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
		StreamArn: aws.String(arn), ShardId: aws.String(shard),
		ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, SequenceNumber: aws.String(b.StartSequenceNumber),
	})
	var trimmed *types.TrimmedDataAccessException
	var missing *types.ResourceNotFoundException
	if errors.As(err, &trimmed) || errors.As(err, &missing) {
		return nil, fmt.Errorf("%w (shard %s from %s): %v", ErrGone, shard, b.StartSequenceNumber, err)
	}
	if err != nil {
		return nil, fmt.Errorf("streamredrive: shard iterator: %w", err)
	}
	max := s.MaxCalls
	if max <= 0 {
		max = 1000
	}
	var out []events.DynamoDBEventRecord
	iter := it.ShardIterator
	for calls := 0; iter != nil && calls < max; calls++ {
		page, err := s.API.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)})
		if errors.As(err, &trimmed) {
			return nil, fmt.Errorf("%w (shard %s): %v", ErrGone, shard, err)
		}
		if err != nil {
			return nil, fmt.Errorf("streamredrive: read shard %s: %w", shard, err)
		}
		for _, r := range page.Records {
			rec, err := dynamostream.Convert(arn, r)
			if err != nil {
				return nil, fmt.Errorf("streamredrive: shard %s: %w", shard, err)
			}
			seq := rec.Change.SequenceNumber
			if SeqLess(b.EndSequenceNumber, seq) {
				return out, nil
			}
			out = append(out, rec)
			if seq == b.EndSequenceNumber {
				return out, nil
			}
		}
		iter = page.NextShardIterator
	}
	return out, nil
}

// findShard is b's shard: the one it names if the stream lists it, else
// the one whose sequence range holds b's start.
func (s *StreamsReader) findShard(ctx context.Context, arn string, b BatchInfo) (string, error) {
	var start *string
	var found string
	for {
		d, err := s.API.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), ExclusiveStartShardId: start})
		var missing *types.ResourceNotFoundException
		if errors.As(err, &missing) {
			return "", fmt.Errorf("%w: stream %s: %v", ErrGone, arn, err)
		}
		if err != nil {
			return "", fmt.Errorf("streamredrive: describe stream: %w", err)
		}
		for _, sh := range d.StreamDescription.Shards {
			id := aws.ToString(sh.ShardId)
			if b.ShardID != "" && id == b.ShardID {
				return id, nil
			}
			r := sh.SequenceNumberRange
			if found == "" && r != nil && !SeqLess(b.StartSequenceNumber, aws.ToString(r.StartingSequenceNumber)) &&
				(r.EndingSequenceNumber == nil || !SeqLess(aws.ToString(r.EndingSequenceNumber), b.StartSequenceNumber)) {
				found = id
			}
		}
		start = d.StreamDescription.LastEvaluatedShardId
		if start == nil {
			break
		}
	}
	if found == "" {
		return "", fmt.Errorf("%w: no shard of %s holds sequence number %s", ErrGone, arn, b.StartSequenceNumber)
	}
	return found, nil
}
