package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/ratelimit"
	"github.com/a2awire/a2awire/shared/routes"
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
	usdSQSRequest     = 0.40 / 1e6   // SQS standard, per request (none of these routes)
	usdStreamRead     = 0.02 / 1e5   // DynamoDB Streams GetRecords, $0.02 per 100,000: not billed when a Lambda trigger reads
)

// usdPerMillion is what a million requests cost at the list prices above:
// the gateway, Lambda's request and its duration (ms at memoryMB, the
// function's configured memory) and DynamoDB's units.
func usdPerMillion(ms float64, memoryMB int, readUnits, writeUnits float64) float64 {
	per := usdHTTPAPI + usdLambdaRequest + ms/1000*float64(memoryMB)/1024*usdLambdaGBSecond +
		readUnits*usdReadUnit + writeUnits*usdWriteUnit
	return per * 1e6
}

// delayProxy is a reverse proxy to DynamoDB Local holding every call d
// before forwarding it: a store on another machine, as DynamoDB is to a
// Lambda (a few ms in region), where DynamoDB Local on loopback answers in
// well under one when idle. It records each call's times, so a request's
// milliseconds can be split into the injected delay, DynamoDB Local's own
// time (forwarded until its answer was copied back) and the rest (the
// harness, the handler, the SDK and the bench's client).
type delayProxy struct {
	*httptest.Server
	mu       sync.Mutex
	idle     *sync.Cond // signalled when inFlight drops to 0
	inFlight int
	calls    []proxyCall
}

// proxyCall is one DynamoDB call through the proxy: it arrived at start,
// was forwarded after the delay at forwarded, and its answer was written
// back by done. op is its DynamoDB operation (X-Amz-Target's action).
type proxyCall struct {
	op                     string
	start, forwarded, done time.Time
}

// newDelayProxy starts a proxy to endpoint adding d to every call.
func newDelayProxy(endpoint string, d time.Duration) (*delayProxy, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	// http.DefaultTransport keeps 2 idle connections per host: a route
	// making more calls side by side would dial DynamoDB Local afresh
	// for the rest on every request.
	rp.Transport = &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}
	p := &delayProxy{}
	p.idle = sync.NewCond(&p.mu)
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.inFlight++
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			if p.inFlight--; p.inFlight == 0 {
				p.idle.Broadcast()
			}
			p.mu.Unlock()
		}()
		c := proxyCall{start: time.Now(), op: r.Header.Get("X-Amz-Target")}
		if i := strings.LastIndexByte(c.op, '.'); i >= 0 {
			c.op = c.op[i+1:]
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
		c.forwarded = time.Now()
		rp.ServeHTTP(w, r)
		c.done = time.Now()
		p.mu.Lock()
		p.calls = append(p.calls, c)
		p.mu.Unlock()
	}))
	return p, nil
}

// take returns the calls recorded since the last take, once none is in
// flight: a client can read a whole answer before the handler forwarding
// it has returned and recorded it.
func (p *delayProxy) take() []proxyCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.inFlight > 0 {
		p.idle.Wait()
	}
	c := p.calls
	p.calls = nil
	return c
}

// storeTime is how long, within one request, at least one of calls was
// at DynamoDB Local (forwarded, not yet answered): its own service time
// on the request's critical path, side-by-side calls counted once.
// inFlight is the same for the whole of each call at the proxy, delay
// included, so the request's time minus inFlight is what it spent with no
// store call outstanding: the harness's and the client's own time.
func storeTime(calls []proxyCall) (store, inFlight time.Duration) {
	return union(calls, func(c proxyCall) (time.Time, time.Time) { return c.forwarded, c.done }),
		union(calls, func(c proxyCall) (time.Time, time.Time) { return c.start, c.done })
}

// union is the length of the union of the intervals span gives for calls.
func union(calls []proxyCall, span func(proxyCall) (time.Time, time.Time)) time.Duration {
	type iv struct{ a, b time.Time }
	ivs := make([]iv, 0, len(calls))
	for _, c := range calls {
		a, b := span(c)
		ivs = append(ivs, iv{a, b})
	}
	slices.SortFunc(ivs, func(x, y iv) int { return x.a.Compare(y.a) })
	var total time.Duration
	var cur iv
	for i, v := range ivs {
		switch {
		case i == 0:
			cur = v
		case !v.a.After(cur.b):
			if v.b.After(cur.b) {
				cur.b = v.b
			}
		default:
			total += cur.b.Sub(cur.a)
			cur = v
		}
	}
	if len(ivs) > 0 {
		total += cur.b.Sub(cur.a)
	}
	return total
}

// latencyRoute is one route of the latency rows.
type latencyRoute struct {
	id, name string
	fn       string // the function serving it (its configured memory)
	status   int
	// next prepares request i (setup it needs, e.g. a member to remove,
	// is done here and not measured) and returns it; a nil key sends it
	// unsigned.
	next func(ctx context.Context, i int) (latencyRequest, error)
}

// latencyRequest is one request of a latency row.
type latencyRequest struct {
	key                ed25519.PrivateKey
	method, path, body string
	// status is the answer expected when it is not the route's (a row
	// alternating two routes).
	status int
}

// fixed is a route whose every request is the same.
func fixed(k ed25519.PrivateKey, method, path, body string) func(context.Context, int) (latencyRequest, error) {
	return func(context.Context, int) (latencyRequest, error) {
		return latencyRequest{k, method, path, body, 0}, nil
	}
}

// latencySample is what one route's measured requests came to.
type latencySample struct {
	ms         []float64            // each request's time, end to end
	store      []float64            // each request's DynamoDB Local time (storeTime), ms
	opStore    map[string][]float64 // each call's DynamoDB Local time by operation, ms
	own        []float64            // each request's time with no store call in flight, ms
	depth      int                  // the most sequential round trips of any
	calls      map[string]int
	readUnits  float64 // summed over the requests
	writeUnits float64
}

// latencyRow is route r's row from its sample: the values results.json
// carries for it (sequential_round_trips, proxy_ms, p50_ms, p99_ms,
// usd_per_million, calls, read_units, write_units per request,
// memory_mb) and, from the proxy's timings, store_ms (the p50 of
// DynamoDB Local's own time per request), p50_less_store_ms and
// p99_less_store_ms (the percentiles of each request's time minus its
// store time: what the route would take over a store answering in
// exactly proxy_ms) and harness_ms (the p50 of the time with no store call
// in flight).
func latencyRow(row Row, r latencyRoute, proxy time.Duration, s latencySample) Row {
	n := len(s.ms)
	if n == 0 {
		return failed(row, fmt.Errorf("no request measured"))
	}
	p50, p99 := percentiles(s.ms)
	calls := map[string]int{}
	total := 0
	for op, c := range s.calls {
		calls[op] = (c + n/2) / n
		total += c
	}
	ru, wu := s.readUnits/float64(n), s.writeUnits/float64(n)
	mem := routes.Config(r.fn).MemoryMB
	usd := usdPerMillion(p50, mem, ru, wu)
	row.Status = within(s.depth <= 2)
	row.Result = fmt.Sprintf("%d sequential round trips; p50 %.1f ms, p99 %.1f ms; %s; %.2g read + %.2g write units; $%.2f per million", s.depth, p50, p99, callsString(calls), ru, wu, usd)
	row.Values = map[string]float64{"sequential_round_trips": float64(s.depth), "proxy_ms": float64(proxy.Microseconds()) / 1000,
		"p50_ms": p50, "p99_ms": p99, "usd_per_million": usd, "calls": float64(total) / float64(n), "read_units": ru, "write_units": wu,
		"memory_mb": float64(mem)}
	if len(s.store) == n && len(s.own) == n {
		less := make([]float64, n)
		for i := range less {
			less[i] = s.ms[i] - s.store[i]
		}
		store, _ := percentiles(s.store)
		own, _ := percentiles(s.own)
		l50, l99 := percentiles(less)
		row.Values["store_ms"], row.Values["harness_ms"] = store, own
		row.Values["p50_less_store_ms"], row.Values["p99_less_store_ms"] = l50, l99
		row.Result += fmt.Sprintf("; of which DynamoDB Local p50 %.1f ms%s, harness p50 %.1f ms; less the store p50 %.1f ms, p99 %.1f ms", store, opsString(s.opStore), own, l50, l99)
	}
	return row
}

// opsString is each operation's p50 at DynamoDB Local, per call, in
// operation order: " (GetItem 1.0, Query 2.1)"; empty without calls.
func opsString(ops map[string][]float64) string {
	if len(ops) == 0 {
		return ""
	}
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(ops)) {
		p50, _ := percentiles(ops[op])
		parts = append(parts, fmt.Sprintf("%s %.1f", op, p50))
	}
	return " (per call: " + strings.Join(parts, ", ") + ")"
}

// percentiles are the p50 and p99 of ms (nearest rank, as the rows have
// always used).
func percentiles(ms []float64) (p50, p99 float64) {
	ms = slices.Clone(ms)
	slices.Sort(ms)
	n := len(ms)
	return ms[n/2], ms[min(n-1, n*99/100)]
}

// latencyRows are rows 7a–7zn: each signed or public route's p50/p99 end to end
// through the harness (gateway stand-in, Lambda stand-in, handler) on
// DynamoDB Local behind a proxy adding proxyMS to every call, with the
// sequential round trips of its critical path (shared/store/roundtrips),
// its calls and units (capacity) and its dollars per million. Each route
// is warmed once (a warm instance: the member key cached), then measured n
// times in a row, one request at a time; what a request needs first (a
// member to remove) is set up before it and not counted. Each request's
// time is split at the proxy (storeTime): DynamoDB Local's own share, the
// delay, and the harness's.
func latencyRows(ctx context.Context, server *dynamolocal.Server, table string, proxy time.Duration, n int) []Row {
	method := fmt.Sprintf("requests over HTTP through local/harness (gateway + Lambda stand-ins) on DynamoDB Local behind a proxy adding %v to every call, %d requests per route one at a time after one warm-up; "+
		"sequential round trips = the deepest call's depth (shared/store/roundtrips), calls and units from shared/store/dynamo/capacity (DynamoDB Local reports a transaction's units low: docs/cost.md); "+
		"store_ms = the p50 of each request's time at DynamoDB Local itself (timed at the proxy from forwarding a call to its answer, side-by-side calls counted once), harness_ms = the p50 of each request's time with no store call at the proxy, p50/p99_less_store_ms = the percentiles of each request's time less its store_ms (the route over a store answering in the proxy's delay); "+
		"usd_per_million = API Gateway HTTP API + Lambda request + Lambda arm64 duration at p50 and the function's memory + DynamoDB on-demand units (%s); target ≤ 2 round trips", proxy, n, pricesDated)
	a, b := newWorldMember(71), newWorldMember(72)
	joinBody := func(m worldMember) string { return fmt.Sprintf(`{"publicKey":%q}`, m.publicKey()) }
	// Fresh keys for the routes that end or start a membership per
	// request: request i of a row uses seed base+i.
	fresh := func(base, i int) worldMember {
		k := ed25519.NewKeyFromSeed(append(make([]byte, ed25519.SeedSize-4), byte(base>>8), byte(base), byte(i>>8), byte(i)))
		return worldMember{key: k, id: auth.AWNID(k.Public().(ed25519.PublicKey))}
	}
	var srvURL string
	joinFresh := func(ctx context.Context, m worldMember, world string) error {
		st, body, err := httpSigned(ctx, srvURL, m.key, "POST", "/v0/worlds/"+world+"/join", joinBody(m))
		if err != nil || (st != 200 && st != 201) {
			return fmt.Errorf("join: %d %s %v", st, body, err)
		}
		return nil
	}
	routesMeasured := []latencyRoute{
		{"7a", "world send", "world-send", 201, fixed(a.key, "POST", "/v0/worlds/lobby/messages", fmt.Sprintf(`{"to":%q,"content":{"text":"hi"}}`, b.id))},
		{"7a2", "world send, a world that batches its messages (queued: 202)", "world-send", 202, fixed(a.key, "POST", "/v0/worlds/bench-batched/messages", fmt.Sprintf(`{"to":%q,"content":{"text":"hi"}}`, b.id))},
		{"7b", "world messages (peek)", "world-messages", 200, fixed(b.key, "GET", "/v0/worlds/lobby/messages?peek=true&limit=10", "")},
		{"7c", "world event poll (wait=0)", "world-events", 200, fixed(b.key, "GET", "/v0/worlds/lobby/events", "")},
		{"7c2", "world event poll (wait=0), a world of 16 event shards", "world-events", 200, fixed(b.key, "GET", "/v0/worlds/bench-sharded/events", "")},
		{"7d", "world agents list", "world-agents", 200, fixed(a.key, "GET", "/v0/worlds/lobby/agents", "")},
		{"7e", "world join (a new member each request)", "world-join", 201, func(_ context.Context, i int) (latencyRequest, error) {
			m := fresh(0x7e00, i)
			return latencyRequest{m.key, "POST", "/v0/worlds/lobby/join", joinBody(m), 0}, nil
		}},
		{"7f", "world leave (a member joined before each request)", "world-leave", 200, func(ctx context.Context, i int) (latencyRequest, error) {
			m := fresh(0x7f00, i)
			return latencyRequest{m.key, "POST", "/v0/worlds/lobby/leave", "", 0}, joinFresh(ctx, m, "lobby")
		}},
		{"7g", "world ping (a member without a webhook)", "world-ping", 200, fixed(a.key, "POST", "/v0/worlds/lobby/ping", fmt.Sprintf(`{"target":%q}`, b.id))},
		{"7h", "world action", "world-act", 201, fixed(a.key, "POST", "/v0/worlds/lobby/actions", `{"action":"wave"}`)},
		{"7h2", "world action, a world that batches its actions (queued: 202)", "world-act", 202, fixed(a.key, "POST", "/v0/worlds/bench-batched/actions", `{"action":"wave"}`)},
		{"7i", "world update by its owner (no publicKey)", "world-put", 200, fixed(a.key, "PUT", "/v0/worlds/bench-owned", `{"name":"Bench"}`)},
		{"7j", "world read (public)", "world-get", 200, fixed(nil, "GET", "/v0/worlds/lobby", "")},
		{"7k", "world agent card (public)", "world-card", 200, fixed(nil, "GET", "/v0/worlds/lobby/.well-known/agent-card.json", "")},
		{"7l", "world discovery (public)", "world-list", 200, fixed(nil, "GET", "/v0/worlds?limit=20", "")},
		{"7m", "the agent's worlds", "agent-worlds", 200, fixed(a.key, "GET", "/v0/agents/"+a.id+"/worlds", "")},
		{"7n", "world kick by its owner (a member joined before each request)", "world-kick", 200, func(ctx context.Context, i int) (latencyRequest, error) {
			m := fresh(0x7100, i)
			return latencyRequest{a.key, "POST", "/v0/worlds/bench-owned/members/" + m.id + "/kick", "", 0}, joinFresh(ctx, m, "bench-owned")
		}},
		{"7o", "world bans list by its owner", "world-bans", 200, fixed(a.key, "GET", "/v0/worlds/bench-owned/bans", "")},
		{"7p", "registry lookup (public)", "registry", 200, fixed(nil, "GET", "/api/v1/agents", "")},
		{"7q", "the network's agent card (public)", "registry", 200, fixed(nil, "GET", "/.well-known/agent-card.json", "")},
		{"7r", "OpenAPI document (public)", "openapi", 200, fixed(nil, "GET", "/openapi.json", "")},
		{"7s", "world close and reopen by its owner, alternately", "world-close", 200, func(_ context.Context, i int) (latencyRequest, error) {
			if i%2 == 0 {
				return latencyRequest{a.key, "POST", "/v0/worlds/bench-owned/close", "", 0}, nil
			}
			return latencyRequest{a.key, "POST", "/v0/worlds/bench-owned/reopen", "", 0}, nil
		}},
		{"7t", "world ban and unban of a non-member by its owner, alternately", "world-ban", 201, func(_ context.Context, i int) (latencyRequest, error) {
			path := "/v0/worlds/bench-owned/bans/" + b.id
			if i%2 == 0 {
				return latencyRequest{a.key, "PUT", path, `{"reason":"bench"}`, 0}, nil
			}
			return latencyRequest{a.key, "DELETE", path, "", 200}, nil
		}},
		{"7u", "world delete by its owner (a world created before each request)", "world-delete", 202, func(ctx context.Context, i int) (latencyRequest, error) {
			id := fmt.Sprintf("bench-del-%d", i)
			st, body, err := httpSigned(ctx, srvURL, a.key, "PUT", "/v0/worlds/"+id, fmt.Sprintf(`{"publicKey":%q,"name":"Bench"}`, a.publicKey()))
			if err == nil && st != 201 {
				err = fmt.Errorf("create %s: %d %s", id, st, body)
			}
			return latencyRequest{a.key, "DELETE", "/v0/worlds/" + id, "", 0}, err
		}},
		{"7v", "world webhook show (a member without a webhook: 404)", "world-webhook-show", 404, fixed(b.key, "GET", "/v0/worlds/lobby/webhook", "")},
	}
	sr := &signedRoutes{base: func() string { return srvURL }, buyer: newWorldMember(75), hooked: newWorldMember(76)}
	routesMeasured = append(routesMeasured, sr.routes(fresh)...)
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
	px, err := newDelayProxy(server.Endpoint(), proxy)
	if err != nil {
		return fail(err)
	}
	defer px.Close()
	m := capacity.New()
	rt := roundtrips.Wrap(dynamo.New(dynamo.LocalClient(px.URL, m.Option()), table))
	// Limits far above the rows' requests: the rows measure the path,
	// not the 429.
	env := map[string]string{}
	for _, op := range []ratelimit.Op{ratelimit.Send, ratelimit.Read, ratelimit.Agents, ratelimit.Ping, ratelimit.Actions, ratelimit.Join} {
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
	srvURL = srv.URL
	if _, _, err := harness.SeedLobby(ctx, rt, h.NetworkKey()); err != nil {
		return fail(err)
	}
	for _, w := range []worldMember{a, b} {
		if err := joinFresh(ctx, w, "lobby"); err != nil {
			return fail(err)
		}
	}
	if st, body, err := httpSigned(ctx, srv.URL, a.key, "PUT", "/v0/worlds/bench-owned", fmt.Sprintf(`{"publicKey":%q,"name":"Bench"}`, a.publicKey())); err != nil || (st != 200 && st != 201) {
		return fail(fmt.Errorf("create bench-owned: %d %s %v", st, body, err))
	}
	// Row 7c2's world: its events written across 16 shards, so a poll
	// Queries 16 partitions and the private one side by side.
	if st, body, err := httpSigned(ctx, srv.URL, a.key, "PUT", "/v0/worlds/bench-sharded", fmt.Sprintf(`{"publicKey":%q,"name":"Bench","eventShards":16}`, a.publicKey())); err != nil || (st != 200 && st != 201) {
		return fail(fmt.Errorf("create bench-sharded: %d %s %v", st, body, err))
	}
	for _, w := range []worldMember{a, b} {
		if err := joinFresh(ctx, w, "bench-sharded"); err != nil {
			return fail(err)
		}
	}
	// Rows 7h2's and 7a2's world: its actions and messages queued (the
	// harness's in-process queue, whose consumer does not run here: the
	// row is the request).
	if st, body, err := httpSigned(ctx, srv.URL, a.key, "PUT", "/v0/worlds/bench-batched", fmt.Sprintf(`{"publicKey":%q,"name":"Bench","batchActions":true,"batchMessages":true}`, a.publicKey())); err != nil || (st != 200 && st != 201) {
		return fail(fmt.Errorf("create bench-batched: %d %s %v", st, body, err))
	}
	for _, w := range []worldMember{a, b} {
		if err := joinFresh(ctx, w, "bench-batched"); err != nil {
			return fail(err)
		}
	}
	sr.operator = h.NetworkKey()
	if err := sr.setUp(ctx, rt, joinFresh); err != nil {
		return fail(fmt.Errorf("set up the signed routes' rows: %w", err))
	}
	for i, r := range routesMeasured {
		s, err := measureRoute(ctx, srv.URL, r, m, rt, px, n)
		if err != nil {
			rows[i] = failed(rows[i], err)
			continue
		}
		rows[i] = latencyRow(rows[i], r, proxy, s)
	}
	return rows
}

// measureRoute warms r up with one request, then measures n, each after
// its setup.
func measureRoute(ctx context.Context, base string, r latencyRoute, m *capacity.Meter, rt *roundtrips.Store, px *delayProxy, n int) (latencySample, error) {
	s := latencySample{calls: map[string]int{}, opStore: map[string][]float64{}}
	for i := -1; i < n; i++ {
		req, err := r.next(ctx, i+1) // request 0 is the warm-up
		if err != nil {
			return s, fmt.Errorf("setup of request %d: %w", i+1, err)
		}
		m.Reset()
		rt.Take()
		px.take()
		start := time.Now()
		st, out, err := httpSigned(ctx, base, req.key, req.method, req.path, req.body)
		elapsed := time.Since(start)
		took := msOf(elapsed)
		pc := px.take()
		store, inFlight := storeTime(pc)
		depth := rt.Take()
		use := m.Take()
		want := r.status
		if req.status != 0 {
			want = req.status
		}
		if err != nil || st != want {
			return s, fmt.Errorf("request %d: %d %s %v", i+1, st, out, err)
		}
		if i < 0 {
			continue // the warm-up: this instance's caches filled
		}
		s.ms = append(s.ms, took)
		s.store = append(s.store, msOf(store))
		for _, c := range pc {
			s.opStore[c.op] = append(s.opStore[c.op], msOf(c.done.Sub(c.forwarded)))
		}
		s.own = append(s.own, msOf(elapsed-inFlight))
		s.depth = max(s.depth, depth)
		for op, c := range use.Calls() {
			s.calls[op] += c
		}
		t := use.Total()
		s.readUnits += t.ReadUnits
		s.writeUnits += t.WriteUnits
	}
	return s, nil
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// httpSigned makes one request to base+path, signed by k unless k is nil.
func httpSigned(ctx context.Context, base string, k ed25519.PrivateKey, method, path, body string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if k != nil {
		s, err := auth.NewSigner(k)
		if err != nil {
			return 0, "", err
		}
		if err := s.Sign(req); err != nil {
			return 0, "", err
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(out), nil
}
