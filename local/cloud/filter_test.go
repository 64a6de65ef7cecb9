package cloud_test

import (
	"testing"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/aws/aws-lambda-go/events"
)

// record is a stream record of an item with key pk/sk and a type.
func record(name, pk, typ string) events.DynamoDBEventRecord {
	img := map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(pk), "sk": events.NewStringAttribute("s"), "type": events.NewStringAttribute(typ)}
	rec := events.DynamoDBEventRecord{EventName: name, EventSource: "aws:dynamodb",
		Change: events.DynamoDBStreamRecord{SequenceNumber: "1", Keys: map[string]events.DynamoDBAttributeValue{"pk": img["pk"], "sk": img["sk"]}}}
	if name != "REMOVE" {
		rec.Change.NewImage = img
	}
	return rec
}

// TestFilterMatchesLikeLambda: Lambda's documented pattern semantics on
// DynamoDB stream records — every field must match, a list is any of its
// conditions, prefix/suffix on strings, exists on presence, anything-but.
func TestFilterMatchesLikeLambda(t *testing.T) {
	insEvent := record("INSERT", "EVENTS#w", "event")
	modEvent := record("MODIFY", "EVENTS#w", "event")
	insHead := record("INSERT", "EVENTHEAD#w", "eventhead")
	remEvent := record("REMOVE", "EVENTS#w", "event")
	tests := []struct {
		name    string
		pattern []string
		rec     events.DynamoDBEventRecord
		want    bool
	}{
		{"no patterns", nil, insHead, true},
		{"event name", []string{`{"eventName":["INSERT"]}`}, insEvent, true},
		{"event name other", []string{`{"eventName":["INSERT"]}`}, modEvent, false},
		{"event name list", []string{`{"eventName":["INSERT","MODIFY"]}`}, modEvent, true},
		{"key prefix", []string{`{"dynamodb":{"Keys":{"pk":{"S":[{"prefix":"EVENTS#"}]}}}}`}, insEvent, true},
		{"key prefix other", []string{`{"dynamodb":{"Keys":{"pk":{"S":[{"prefix":"EVENTS#"}]}}}}`}, insHead, false},
		{"suffix", []string{`{"dynamodb":{"Keys":{"pk":{"S":[{"suffix":"#w"}]}}}}`}, insHead, true},
		{"new image", []string{`{"dynamodb":{"NewImage":{"type":{"S":["event"]}}}}`}, insEvent, true},
		{"new image absent", []string{`{"dynamodb":{"NewImage":{"type":{"S":["event"]}}}}`}, remEvent, false},
		{"exists false", []string{`{"dynamodb":{"NewImage":[{"exists":false}]}}`}, remEvent, true},
		{"exists true", []string{`{"dynamodb":{"NewImage":[{"exists":true}]}}`}, remEvent, false},
		{"anything-but", []string{`{"eventName":[{"anything-but":["REMOVE"]}]}`}, modEvent, true},
		{"anything-but hit", []string{`{"eventName":[{"anything-but":"REMOVE"}]}`}, remEvent, false},
		{"all fields", []string{routes.EventInserts().Pattern()}, modEvent, false},
		{"any pattern", []string{`{"eventName":["REMOVE"]}`, routes.EventInserts().Pattern()}, insEvent, true},
	}
	for _, tt := range tests {
		f, err := cloud.NewFilter(tt.pattern)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		got, err := f.MatchValue(tt.rec)
		if err != nil || got != tt.want {
			t.Errorf("%s: Match = %v %v, want %v", tt.name, got, err, tt.want)
		}
	}
}

// TestFilterRefusesWhatItCannotApply: an operator the harness does not
// implement is an error, never a pattern silently matching differently.
func TestFilterRefusesWhatItCannotApply(t *testing.T) {
	for _, p := range []string{`[]`, `{}`, `{"a":"x"}`, `{"a":[]}`, `{"a":[{"numeric":[">",1]}]}`, `{"a":[{"prefix":1}]}`, `{"a":[{"prefix":"x","suffix":"y"}]}`, `{"a":[{"anything-but":{"prefix":"x"}}]}`} {
		if _, err := cloud.NewFilter([]string{p}); err == nil {
			t.Errorf("%s accepted", p)
		}
	}
}
