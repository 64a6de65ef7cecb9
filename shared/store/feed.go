package store

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Feed is a change feed: every committed change of a table, once, in commit
// order per partition key, as DynamoDB Streams hands records to Lambda
// (events.DynamoDBEventRecord with NEW_AND_OLD_IMAGES). memory and bolt keep
// their own (bolt's survives a restart until consumed); the dynamo package's
// stream reader serves DynamoDB's (or DynamoDB Local's) real stream.
//
// Each consumer (a stream-triggered function) has its own position. Read
// returns records after the consumer's committed position, so reading again
// without a Commit returns the same records: a failed batch is retried, never
// skipped. A consumer starts at the oldest record the feed still holds when
// it first reads; a feed may drop records every consumer it knows has
// committed, so all consumers make their first Read before any Commit (the
// harness starts them together; engines may also take their names up front).
// Records of one partition key come in commit order; across partition keys
// a feed promises no order (DynamoDB Streams shards by key).
type Feed interface {
	// Read waits until consumer has uncommitted records (or ctx ends) and
	// returns up to max of them, oldest first.
	Read(ctx context.Context, consumer string, max int) ([]events.DynamoDBEventRecord, error)
	// Commit marks every record of consumer up to and including the one
	// with sequence number seq as consumed.
	Commit(ctx context.Context, consumer, seq string) error
}

// Event names of change records.
const (
	EventInsert = "INSERT"
	EventModify = "MODIFY"
	EventRemove = "REMOVE"
)

// SequenceNumber formats a feed sequence number the way DynamoDB Streams
// does (a decimal string); zero padding keeps string order numeric order.
func SequenceNumber(n uint64) string { return fmt.Sprintf("%021d", n) }

// ParseSequenceNumber parses a sequence number made by SequenceNumber.
func ParseSequenceNumber(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) }

// StreamImage converts an item to a stream record image.
func StreamImage(it Item) map[string]events.DynamoDBAttributeValue {
	if it == nil {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(it))
	for k, v := range it {
		out[k] = StreamValue(v)
	}
	return out
}

// StreamValue converts one attribute value to its stream form.
func StreamValue(v types.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *types.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *types.AttributeValueMemberNULL:
		return events.NewNullAttribute()
	case *types.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, x := range v.Value {
			l[i] = StreamValue(x)
		}
		return events.NewListAttribute(l)
	case *types.AttributeValueMemberM:
		return events.NewMapAttribute(StreamImage(v.Value))
	case *types.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	case *types.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value)
	case *types.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value)
	}
	return events.NewNullAttribute()
}

// FromStreamImage converts a stream record image back to an item, for
// stream-triggered functions that read it.
func FromStreamImage(img map[string]events.DynamoDBAttributeValue) (Item, error) {
	if img == nil {
		return nil, nil
	}
	out := make(Item, len(img))
	for k, v := range img {
		x, err := FromStreamValue(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
		out[k] = x
	}
	return out, nil
}

// FromStreamValue converts one stream attribute value back.
func FromStreamValue(v events.DynamoDBAttributeValue) (types.AttributeValue, error) {
	switch v.DataType() {
	case events.DataTypeString:
		return S(v.String()), nil
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}, nil
	case events.DataTypeBinary:
		return B(v.Binary()), nil
	case events.DataTypeBoolean:
		return Bool(v.Boolean()), nil
	case events.DataTypeNull:
		return Null(), nil
	case events.DataTypeList:
		l := make([]types.AttributeValue, 0, len(v.List()))
		for _, x := range v.List() {
			y, err := FromStreamValue(x)
			if err != nil {
				return nil, err
			}
			l = append(l, y)
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case events.DataTypeMap:
		m, err := FromStreamImage(v.Map())
		if err != nil {
			return nil, err
		}
		if m == nil {
			m = Item{}
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	case events.DataTypeStringSet:
		return SS(v.StringSet()...), nil
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: v.NumberSet()}, nil
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: v.BinarySet()}, nil
	}
	return nil, fmt.Errorf("unknown stream data type %v: %w", v.DataType(), ErrInvalid)
}

// ChangeRecord builds the stream record of one committed change: INSERT
// (old nil), MODIFY or REMOVE (new nil). It returns false when nothing
// changed (DynamoDB Streams writes no record for a write that leaves the
// item as it was). arn is the stream's ARN; created is the commit time in
// epoch seconds.
func ChangeRecord(arn string, seq uint64, created int64, old, new Item) (events.DynamoDBEventRecord, bool) {
	var name string
	var keyed Item
	switch {
	case old == nil && new == nil:
		return events.DynamoDBEventRecord{}, false
	case old == nil:
		name, keyed = EventInsert, new
	case new == nil:
		name, keyed = EventRemove, old
	default:
		if EqualItems(old, new) {
			return events.DynamoDBEventRecord{}, false
		}
		name, keyed = EventModify, new
	}
	seqStr := SequenceNumber(seq)
	rec := events.DynamoDBEventRecord{
		AWSRegion:      "local",
		EventID:        seqStr,
		EventName:      name,
		EventSource:    "aws:dynamodb",
		EventVersion:   "1.1",
		EventSourceArn: arn,
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{},
			Keys:                        StreamImage(Item{AttrPK: keyed[AttrPK], AttrSK: keyed[AttrSK]}),
			NewImage:                    StreamImage(new),
			OldImage:                    StreamImage(old),
			SequenceNumber:              seqStr,
			SizeBytes:                   int64(ItemSize(old) + ItemSize(new)),
			StreamViewType:              string(events.DynamoDBStreamViewTypeNewAndOldImages),
		},
	}
	rec.Change.ApproximateCreationDateTime = epoch(created)
	return rec, true
}

// SortedNames returns an item's attribute names in order, for stable output.
func SortedNames(it Item) []string {
	names := make([]string, 0, len(it))
	for k := range it {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
