package stack_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/aws/aws-lambda-go/events"
)

// checkStreamFilters: every stream mapping of the template carries its
// trigger's filter patterns as FilterCriteria, and on a spread of records
// (each change kind on the table's partitions) the template's patterns
// pass exactly the records the harness's stream driver passes. For the
// webhook dispatcher that is the INSERTs of event items and nothing else.
func checkStreamFilters(t *testing.T, s *synthesized) {
	var recs []events.DynamoDBEventRecord
	for _, name := range []string{store.EventInsert, store.EventModify, store.EventRemove} {
		for _, pk := range []string{"EVENTS#w", "EVENTS#w#aw:sha256:00", "EVENTHEAD#w", "WORLD#w", "NONCE#k", "RATE#w#send", "INBOX#w#aw:x"} {
			img := map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(pk), "sk": events.NewStringAttribute("01J")}
			r := events.DynamoDBEventRecord{EventName: name, EventSource: "aws:dynamodb", Change: events.DynamoDBStreamRecord{Keys: img, SequenceNumber: "1"}}
			if name != store.EventRemove {
				r.Change.NewImage = img
			}
			recs = append(recs, r)
		}
	}
	checked := 0
	for _, fn := range s.props.Functions {
		for _, tr := range fn.Triggers {
			if tr.Kind != routes.StreamTrigger {
				continue
			}
			fnID := s.logicalID(t, s.stack.Functions[fn.Name])
			var got []string
			found := false
			for _, r := range s.ofType("AWS::Lambda::EventSourceMapping") {
				if fmt.Sprint(r.Properties["FunctionName"]) != fmt.Sprint(map[string]any{"Ref": fnID}) {
					continue
				}
				found = true
				if fc, ok := r.Properties["FilterCriteria"].(map[string]any); ok {
					for _, f := range asList(fc["Filters"]) {
						got = append(got, fmt.Sprint(f.(map[string]any)["Pattern"]))
					}
				}
			}
			if !found {
				t.Errorf("%s: no event source mapping", fn.Name)
				continue
			}
			if !slices.Equal(got, tr.Patterns()) {
				t.Errorf("%s: template filters %q, route table %q", fn.Name, got, tr.Patterns())
			}
			deployed, err := cloud.NewFilter(got)
			if err != nil {
				t.Fatalf("%s: the harness cannot apply the template's filter: %v", fn.Name, err)
			}
			harness, err := cloud.NewFilter(tr.Patterns())
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range recs {
				d, err1 := deployed.MatchValue(rec)
				h, err2 := harness.MatchValue(rec)
				if err1 != nil || err2 != nil || d != h {
					t.Errorf("%s: %s %s: template passes %v, harness %v (%v %v)", fn.Name, rec.EventName, rec.Change.Keys["pk"].String(), d, h, err1, err2)
				}
				if fn.Name == "webhook-dispatcher" {
					want := rec.EventName == store.EventInsert && (rec.Change.Keys["pk"].String() == "EVENTS#w" || rec.Change.Keys["pk"].String() == "EVENTS#w#aw:sha256:00")
					if d != want {
						t.Errorf("dispatcher: %s %s passes %v, want %v", rec.EventName, rec.Change.Keys["pk"].String(), d, want)
					}
					checked++
				}
			}
		}
	}
	if checked == 0 {
		t.Error("the webhook dispatcher's stream filter was not checked")
	}
}
