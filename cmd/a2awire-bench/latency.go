package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/ratelimit"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/capacity"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamostream"
	"github.com/a2awire/a2awire/shared/store/roundtrips"
)

// List prices the dollar figures use: AWS us-east-1, read on 2026-12-04
// (aws.amazon.com/api-gateway/pricing, /lambda/pricing, /dynamodb/pricing/on-demand).
const (
	pricesDated       = "2026-12-04, us-east-1 list prices"
	usdHTTPAPI        = 1.00 / 1e6   // API Gateway HTTP API, per request (first 300 M a month)
	usdLambdaRequest  = 0.20 / 1e6   // Lambda, per request
	usdLambdaGBSecond = 0.0000133334 // Lambda arm64, per GB-second (first 7.5 G GB-s a month)
	usdReadUnit       = 0.125 / 1e6  // DynamoDB on-demand, per read request unit
	usdWriteUnit      = 0.625 / 1e6  // DynamoDB on-demand, per write request unit
	lambdaMemoryGB    = 256.0 / 1024 // the world functions' MemoryMB in shared/routes
	usdSQSRequest     = 0.40 / 1e6   // SQS standard, per request (none of these routes)
	usdStreamRead     = 0.02 / 1e5   // DynamoDB Streams GetRecords, $0.02 per 100,000 (none of these routes)
)

// usdPerMillion is what a million requests cost at the list prices above:
// the gateway, Lambda's request and its duration (ms at the configured
// memory) and DynamoDB's units.
func usdPerMillion(ms, readUnits, writeUnits float64) float64 {
	per := usdHTTPAPI + usdLambdaRequest + ms/1000*lambdaMemoryGB*usdLambdaGBSecond +
		readUnits*usdReadUnit + writeUnits*usdWriteUnit
	return per * 1e6
}

// delayProxy is a reverse proxy to DynamoDB Local holding every call d
// before forwarding it: a store on another machine, as DynamoDB is to a
// Lambda (a few ms in region), where DynamoDB Local on loopback answers in
// well under one.
func delayProxy(endpoint string, d time.Duration) (*httptest.Server, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
		rp.ServeHTTP(w, r)
	})), nil
}

// latencyRoute is one route of the latency rows.
type latencyRoute struct {
	id, name           string
	signer             worldMember
	method, path, body string
	status             int
}

// latencyRows are rows 7a–7d: each signed world route's p50/p99 end to
// end through the harness (gateway stand-in, Lambda stand-in, handler) on
// DynamoDB Local behind a proxy adding proxyMS to every call, with the
// sequential round trips of its critical path (shared/store/roundtrips),
// its calls and units (capacity) and its dollars per million. Each route
// is warmed once (a warm instance: the member key cached), then measured n
// times in a row, one request at a time.
func latencyRows(ctx context.Context, server *dynamolocal.Server, table string, proxy time.Duration, n int) []Row {
	method := fmt.Sprintf("signed requests over HTTP through local/harness (gateway + Lambda stand-ins) on DynamoDB Local behind a proxy adding %v to every call, %d requests per route one at a time after one warm-up; "+
		"sequential round trips = the deepest call's depth (shared/store/roundtrips), calls and units from shared/store/dynamo/capacity; "+
		"usd_per_million = API Gateway HTTP API + Lambda request + Lambda arm64 duration at p50 and 256 MB + DynamoDB on-demand units (%s); target ≤ 2 round trips", proxy, n, pricesDated)
	a, b := newWorldMember(71), newWorldMember(72)
	routesMeasured := []latencyRoute{
		{"7a", "world send", a, "POST", "/v0/worlds/lobby/messages", fmt.Sprintf(`{"to":%q,"content":{"text":"hi"}}`, b.id), 201},
		{"7b", "world messages (peek)", b, "GET", "/v0/worlds/lobby/messages?peek=true&limit=10", "", 200},
		{"7c", "world event poll (wait=0)", b, "GET", "/v0/worlds/lobby/events", "", 200},
		{"7d", "world agents list", a, "GET", "/v0/worlds/lobby/agents", "", 200},
	}
	var rows []Row
	for _, r := range routesMeasured {
		rows = append(rows, Row{ID: r.id, Name: fmt.Sprintf("latency over a %v store: %s", proxy, r.name), Target: "≤ 2 sequential round trips", Method: method})
	}
	fail := func(err error) []Row {
		for i := range rows {
			rows[i] = failed(rows[i], err)
		}
		return rows
	}
	px, err := delayProxy(server.Endpoint(), proxy)
	if err != nil {
		return fail(err)
	}
	defer px.Close()
	m := capacity.New()
	rt := roundtrips.Wrap(dynamo.New(dynamo.LocalClient(px.URL, m.Option()), table))
	// Limits far above the rows' requests: the rows measure the path,
	// not the 429.
	env := map[string]string{}
	for _, op := range []ratelimit.Op{ratelimit.Send, ratelimit.Read, ratelimit.Agents, ratelimit.Ping, ratelimit.Actions} {
		env[ratelimit.EnvVar(op)] = "1000000"
	}
	// The stream triggers (webhook delivery) read the table's stream
	// directly: off every route's critical path.
	feed, err := dynamostream.NewFeed(ctx, dynamostream.LocalClient(server.Endpoint()), server.Client(), table)
	if err != nil {
		return fail(err)
	}
	h, err := harness.New(harness.Options{Log: logging.Discard(), Store: rt, Feed: feed, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		return fail(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	if _, _, err := harness.SeedLobby(ctx, rt, h.NetworkKey()); err != nil {
		return fail(err)
	}
	for _, w := range []worldMember{a, b} {
		if st, body, err := httpSigned(ctx, srv.URL, w.key, "POST", "/v0/worlds/lobby/join", fmt.Sprintf(`{"publicKey":%q}`, w.publicKey())); err != nil || (st != 200 && st != 201) {
			return fail(fmt.Errorf("join: %d %s %v", st, body, err))
		}
	}
	for i, r := range routesMeasured {
		w, meth, path, body := r.signer, r.method, r.path, r.body
		// The warm-up: the instance's member key cache filled.
		if st, out, err := httpSigned(ctx, srv.URL, w.key, meth, path, body); err != nil || st != r.status {
			rows[i] = failed(rows[i], fmt.Errorf("warm-up: %d %s %v", st, out, err))
			continue
		}
		m.Reset()
		rt.Take()
		var ms []float64
		depth := 0
		var bad error
		for range n {
			start := time.Now()
			st, out, err := httpSigned(ctx, srv.URL, w.key, meth, path, body)
			ms = append(ms, float64(time.Since(start).Microseconds())/1000)
			depth = max(depth, rt.Take())
			if err != nil || st != r.status {
				bad = fmt.Errorf("%d %s %v", st, out, err)
				break
			}
		}
		if bad != nil {
			rows[i] = failed(rows[i], bad)
			continue
		}
		use := m.Take()
		t := use.Total()
		calls := map[string]int{}
		for op, c := range use.Calls() {
			calls[op] = (c + n/2) / n
		}
		slices.Sort(ms)
		p50, p99 := ms[len(ms)/2], ms[min(len(ms)-1, len(ms)*99/100)]
		ru, wu := t.ReadUnits/float64(n), t.WriteUnits/float64(n)
		usd := usdPerMillion(p50, ru, wu)
		rows[i].Status = within(depth <= 2)
		rows[i].Result = fmt.Sprintf("%d sequential round trips; p50 %.1f ms, p99 %.1f ms; %s; %.2g read + %.2g write units; $%.2f per million", depth, p50, p99, callsString(calls), ru, wu, usd)
		rows[i].Values = map[string]float64{"sequential_round_trips": float64(depth), "proxy_ms": float64(proxy.Microseconds()) / 1000,
			"p50_ms": p50, "p99_ms": p99, "usd_per_million": usd, "calls": float64(t.Calls) / float64(n), "read_units": ru, "write_units": wu}
	}
	return rows
}

// httpSigned makes one signed request to base+path.
func httpSigned(ctx context.Context, base string, k ed25519.PrivateKey, method, path, body string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	s, err := auth.NewSigner(k)
	if err != nil {
		return 0, "", err
	}
	if err := s.Sign(req); err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(out), nil
}
