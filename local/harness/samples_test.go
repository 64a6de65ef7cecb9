package harness_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/aws/aws-lambda-go/events"
)

var update = flag.Bool("update", false, "regenerate events/*.json and events/expected.json in the cloud shape")

// Sample events are shaped as API Gateway sends them in AWS: this API's
// host, a client address appended to x-forwarded-for, https.
const (
	sampleAPI      = "a1b2c3d4e5"
	sampleHost     = sampleAPI + ".execute-api.us-east-1.amazonaws.com"
	sampleClientIP = "203.0.113.10"
)

var sampleTime = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// Trigger sample files and the test functions that take them.
const (
	streamSample   = "dynamodb-stream-ledger-record-entry.json"
	scheduleSample = "eventbridge-scheduled-event.json"
)

// TestMain regenerates the samples first when asked (go test ./local/harness -run TestSampleEvents -update).
func TestMain(m *testing.M) {
	flag.Parse()
	if *update {
		if err := regenerate(); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

// regenerate rewrites every fixture-*.json from the request it describes,
// through cloud.BuildEvent, adds the trigger samples, and records each
// sample's answer in expected.json (keys that differ between two runs are
// listed as ignored).
func regenerate() error {
	files, err := filepath.Glob("../../events/fixture-*.json")
	if err != nil {
		return err
	}
	expected := map[string]expectation{}
	for _, path := range files {
		old, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var e events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(old, &e); err != nil {
			return err
		}
		body := []byte(e.Body)
		if e.IsBase64Encoded {
			if body, err = base64.StdEncoding.DecodeString(e.Body); err != nil {
				return err
			}
		}
		target := "https://" + sampleHost + e.RawPath
		if e.RawQueryString != "" {
			target += "?" + e.RawQueryString
		}
		r := httptest.NewRequest(e.RequestContext.HTTP.Method, target, bytes.NewReader(body))
		for k, v := range e.Headers {
			switch k {
			case "host", "x-forwarded-proto", "x-forwarded-port", "content-length", "x-amzn-trace-id":
			case "x-forwarded-for":
				if strings.Contains(v, ",") {
					r.Header.Set(k, v[:strings.LastIndex(v, ",")])
				}
			default:
				r.Header.Set(k, v)
			}
		}
		if filepath.Base(path) == "fixture-punctual-ping.json" && r.Header.Get("X-Forwarded-For") == "" {
			// One sample shows a client behind a proxy of its own.
			r.Header.Set("X-Forwarded-For", "198.51.100.7")
		}
		r.RemoteAddr = sampleClientIP + ":54321"
		route, params, ok := routes.Match(r.Method, r.URL.Path)
		if !ok {
			return &os.PathError{Op: "route", Path: path, Err: os.ErrNotExist}
		}
		ev := cloud.BuildEvent(r, route, params, body, sampleTime)
		ev.Headers["x-amzn-trace-id"] = "Root=1-6926a000-0123456789abcdef01234567"
		ev.RequestContext.RequestID = "sample-request-id"
		ev.RequestContext.APIID = sampleAPI
		ev.RequestContext.AccountID = "123456789012"
		raw, err := cloudShape(ev)
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			return err
		}
		name := filepath.Base(path)
		fn := functionOf(name)
		var outs [3]events.APIGatewayV2HTTPResponse
		for i := range outs {
			h, err := harness.New(harness.Options{Log: logging.Discard()})
			if err != nil {
				return err
			}
			out, err := h.Invoke(context.Background(), fn, raw)
			h.Close()
			if err != nil {
				return err
			}
			if err := json.Unmarshal(out, &outs[i]); err != nil {
				return err
			}
			time.Sleep(2 * time.Millisecond)
		}
		exp := expectation{Status: outs[0].StatusCode}
		if outs[0].Body != "" {
			exp.Body = json.RawMessage(outs[0].Body)
			ignore := map[string]bool{}
			for _, o := range outs[1:] {
				for _, k := range differing("", decode(outs[0].Body), decode(o.Body)) {
					ignore[k] = true
				}
			}
			// Timings can agree by chance in a few runs; they are never
			// part of the contract of a sample.
			for _, k := range []string{"metadata.duration_ms", "output.actual_ms", "output.server_epoch"} {
				if has(decode(outs[0].Body), k) {
					ignore[k] = true
				}
			}
			exp.Ignore = slices.Sorted(maps.Keys(ignore))
		}
		expected[name] = exp
	}

	// A stream batch as the table's stream delivers a ledger write.
	st := memory.New()
	defer st.Close()
	h, err := harness.New(harness.Options{Log: logging.Discard(), Store: st})
	if err != nil {
		return err
	}
	defer h.Close()
	// Register the consumer before the write, so the feed keeps its records.
	pre, cancelPre := context.WithTimeout(context.Background(), 10*time.Millisecond)
	_, _ = st.Read(pre, "sample", 1)
	cancelPre()
	raw, err := os.ReadFile("../../events/fixture-ledger-record-entry.json")
	if err != nil {
		return err
	}
	if _, err := h.Invoke(context.Background(), "fixture-ledger", raw); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	recs, err := st.Read(ctx, "sample", 100)
	if err != nil {
		return err
	}
	if err := writeJSON("../../events/"+streamSample, events.DynamoDBEvent{Records: recs}); err != nil {
		return err
	}
	expected[streamSample] = expectation{Trigger: "stream"}
	sched := cloud.ScheduledEvent("fixture-example", sampleTime)
	sched.ID = "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa"
	sched.AccountID = "123456789012"
	sched.Region = "us-east-1"
	sched.Resources = []string{"arn:aws:events:us-east-1:123456789012:rule/fixture-example-schedule"}
	if err := writeJSON("../../events/"+scheduleSample, sched); err != nil {
		return err
	}
	expected[scheduleSample] = expectation{Trigger: "schedule"}
	return writeJSON("../../events/expected.json", expected)
}

// has reports whether the dotted path names a key of v.
func has(v any, path string) bool {
	parts := strings.Split(path, ".")
	for _, p := range parts {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = m[p]; !ok {
			return false
		}
	}
	return true
}

// cloudShape renders an event as API Gateway sends it: without the empty
// mTLS block the Go struct always carries.
func cloudShape(ev events.APIGatewayV2HTTPRequest) ([]byte, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	delete(m["requestContext"].(map[string]any), "authentication")
	b, err = json.MarshalIndent(m, "", "  ")
	return append(b, '\n'), err
}

func writeJSON(path string, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(raw, '\n'), 0o644)
}

func decode(s string) any {
	var v any
	_ = json.Unmarshal([]byte(s), &v)
	return v
}

// differing lists the dotted paths of object keys whose values differ.
func differing(prefix string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		if reflect.DeepEqual(a, b) {
			return nil
		}
		return []string{strings.TrimPrefix(prefix, ".")}
	}
	var out []string
	for k, v := range am {
		out = append(out, differing(prefix+"."+k, v, bm[k])...)
	}
	return out
}

// triggerProbe is a test function wired as a stream or schedule target: it
// records the event it was invoked with, as it decoded it.
type triggerProbe struct {
	mu     sync.Mutex
	stream []events.DynamoDBEvent
	sched  []events.EventBridgeEvent
}

func (p *triggerProbe) functions() []harness.Function {
	return []harness.Function{
		{Name: "test-stream", Handler: func(_ context.Context, e events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.stream = append(p.stream, e)
			return events.DynamoDBEventResponse{}, nil
		}, Config: routes.Function{Name: "test-stream", TimeoutSeconds: 10, Triggers: []routes.Trigger{{Kind: routes.StreamTrigger, ReportBatchItemFailures: true}}}},
		{Name: "test-schedule", Handler: func(_ context.Context, e events.EventBridgeEvent) error {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.sched = append(p.sched, e)
			return nil
		}, Config: routes.Function{Name: "test-schedule", TimeoutSeconds: 10, Triggers: []routes.Trigger{{Kind: routes.ScheduleTrigger, Schedule: "rate(1 minute)"}}}},
	}
}

// TestTriggerSampleEvents runs the stream and schedule samples through test
// functions' entries: each decodes to the event the file holds, and the
// stream sample is a ledger write as the feed delivers it.
func TestTriggerSampleEvents(t *testing.T) {
	p := &triggerProbe{}
	h := mustHarness(t, harness.Options{Log: logging.Discard(), Extra: p.functions()})
	for file, fn := range map[string]string{streamSample: "test-stream", scheduleSample: "test-schedule"} {
		raw, err := os.ReadFile("../../events/" + file)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Invoke(context.Background(), fn, raw); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.stream) != 1 || len(p.sched) != 1 {
		t.Fatalf("stream %d, schedule %d invocations", len(p.stream), len(p.sched))
	}
	recs := p.stream[0].Records
	if len(recs) == 0 {
		t.Fatal("stream sample has no records")
	}
	var sawEntry bool
	for _, r := range recs {
		if r.EventSource != "aws:dynamodb" || !slices.Contains([]string{"INSERT", "MODIFY", "REMOVE"}, r.EventName) || r.Change.SequenceNumber == "" || r.Change.Keys["pk"].String() == "" {
			t.Errorf("record %+v", r)
		}
		if strings.Contains(r.Change.NewImage["pk"].String(), "acct-demo") {
			sawEntry = true
		}
	}
	if !sawEntry {
		t.Error("the stream sample does not carry the ledger write for acct-demo")
	}
	if e := p.sched[0]; e.DetailType != "Scheduled Event" || e.Source != "aws.events" || !e.Time.Equal(sampleTime) {
		t.Errorf("schedule sample %+v", e)
	}
}

// TestRouteSampleEvents sends every route's generated sample
// (events/routes/, written by go generate ./shared/routes from the route
// table) through the Lambda entry of the function its routeKey names, as
// `make invoke` does. Each is unsigned with a body of {}: a public route
// must answer it (below 500, a JSON body, not the access layer's "no
// route"), any other route must refuse it with 401 or, on a signed route
// that reads the key from the body first, a 4xx. Every route of the table
// has exactly one sample.
func TestRouteSampleEvents(t *testing.T) {
	files, err := filepath.Glob("../../events/routes/*.json")
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]routes.Route{}
	for _, r := range routes.All() {
		if routes.Streamed(r.Function) {
			continue // a function URL's, not API Gateway's: no sample (cmd/a2awire-gen)
		}
		byKey[r.Key()] = r
	}
	h := mustHarness(t, testOptions(t))
	sampled := map[string]bool{}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var ev events.APIGatewayV2HTTPRequest
			if err := json.Unmarshal(raw, &ev); err != nil {
				t.Fatal(err)
			}
			r, ok := byKey[ev.RouteKey]
			if !ok || sampled[ev.RouteKey] {
				t.Fatalf("routeKey %q: in the table %t, sampled before %t", ev.RouteKey, ok, sampled[ev.RouteKey])
			}
			sampled[ev.RouteKey] = true
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			out, err := h.Invoke(ctx, r.Function, raw)
			if err != nil {
				t.Fatal(err)
			}
			var resp events.APIGatewayV2HTTPResponse
			if err := json.Unmarshal(out, &resp); err != nil {
				t.Fatal(err)
			}
			if !json.Valid([]byte(resp.Body)) || strings.Contains(resp.Body, `"no route `) {
				t.Fatalf("%s: body %s, want the route's own JSON answer", r.Key(), resp.Body)
			}
			switch {
			case r.Auth == routes.Public:
				if resp.StatusCode >= 500 {
					t.Errorf("%s (public): status %d, body %s; want an answer below 500", r.Key(), resp.StatusCode, resp.Body)
				}
			case r.Auth == routes.Signed:
				if resp.StatusCode < 400 || resp.StatusCode >= 500 {
					t.Errorf("%s (signed) unsigned: status %d, body %s; want a 4xx refusal", r.Key(), resp.StatusCode, resp.Body)
				}
			default:
				if resp.StatusCode != 401 {
					t.Errorf("%s (%s) unsigned: status %d, body %s; want 401", r.Key(), r.Auth, resp.StatusCode, resp.Body)
				}
			}
		})
	}
	for key := range byKey {
		if !sampled[key] {
			t.Errorf("route %s has no sample in events/routes: run go generate ./shared/routes", key)
		}
	}
}
