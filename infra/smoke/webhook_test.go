package smoke

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// webhookCases run the webhook functions' mains: the member routes over the
// world smoke table (a webhook URL held to https in Lambda), the dispatcher
// on a stream batch holding no event (nothing to deliver, no failures) and
// the retry function on a scheduled event (nothing due).
func webhookCases() []smokeCase {
	c := func(fn string, invokes ...invocation) smokeCase {
		return smokeCase{function: fn, env: worldEnv, invokes: invokes}
	}
	raw := func(ev any, check func(t *testing.T, raw []byte)) invocation {
		return invocation{event: func(*testing.T) any { return ev }, checkRaw: check}
	}
	return []smokeCase{
		c("world-webhook-set",
			worldCall(smokeMember, "PUT", "/v0/worlds/lobby/webhook", `{"url":"https://hooks.example/a2awire"}`, 200, dataHas("url", "https://hooks.example/a2awire")),
			worldCall(smokeMember, "PUT", "/v0/worlds/lobby/webhook", `{"url":"http://127.0.0.1/"}`, 400, errorCode("INVALID_REQUEST")),
			worldCall(smokeOutsider, "PUT", "/v0/worlds/lobby/webhook", `{"url":"https://hooks.example/"}`, 401, errorCode("NOT_JOINED"))),
		c("world-webhook-show",
			worldCall(smokeMember, "GET", "/v0/worlds/lobby/webhook", "", 404, errorCode("NOT_FOUND"))),
		c("world-webhook-remove",
			worldCall(smokeMember, "DELETE", "/v0/worlds/lobby/webhook", "", 404, errorCode("NOT_FOUND"))),
		c("world-webhook-replay",
			worldCall(smokeMember, "POST", "/v0/worlds/lobby/webhook/replay", `{"since":"2026-01-01T00:00:00Z"}`, 404, errorCode("NOT_FOUND"))),
		c("webhook-dispatcher",
			raw(events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{EventName: "MODIFY", EventSource: "aws:dynamodb"}}},
				func(t *testing.T, raw []byte) {
					var resp events.DynamoDBEventResponse
					if err := json.Unmarshal(raw, &resp); err != nil || len(resp.BatchItemFailures) != 0 {
						t.Errorf("response %s: %v", raw, err)
					}
				})),
		c("webhook-retry",
			raw(events.EventBridgeEvent{Version: "0", ID: "smoke", DetailType: "Scheduled Event", Source: "aws.events",
				Time: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Detail: json.RawMessage(`{}`)},
				func(t *testing.T, raw []byte) {
					if string(raw) != "null" {
						t.Errorf("response %s, want null", raw)
					}
				})),
	}
}
