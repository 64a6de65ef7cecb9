package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/inbox"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/ratelimit"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/capacity"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/worldhttp"
)

// budget is an operation's written DynamoDB cost: at most calls[op] of
// each listed call, and, when oneOf is set, at most oneOfMax calls in total
// among those (the inbox's "1 write request": a DeleteItem for one message,
// a TransactWriteItems for more). Any call it does not name is over budget.
type budget struct {
	calls    map[string]int
	oneOf    []string
	oneOfMax int
	text     string // the target as the cost tables in docs/ word it
}

// allows reports whether calls are at or under the budget.
func (b budget) allows(calls map[string]int) bool {
	group := 0
	for op, n := range calls {
		if slices.Contains(b.oneOf, op) {
			group += n
			continue
		}
		if n > b.calls[op] {
			return false
		}
	}
	return group <= b.oneOfMax
}

// authCalls is what a member route's signature check costs (package
// shared/store/guard): the nonce's conditional PutItem and, on a key this
// instance verified before, the member key's and the manifest's existence
// (two GetItems beside a read; inside a write's transaction all of it
// rides there and costs no call); on a limited route the rate-limit
// window's UpdateItem.
const authCalls = "auth: 1 PutItem (nonce) + 2 GetItem (member key, manifest), in the write's transaction on a write"

// with returns calls with the auth calls of a member route added (and the
// rate-limit UpdateItem when limited).
func with(limited bool, domain map[string]int) map[string]int {
	out := maps.Clone(domain)
	if out == nil {
		out = map[string]int{}
	}
	out["PutItem"]++
	out["GetItem"] += 2
	if limited {
		out["UpdateItem"]++
	}
	return out
}

// worldMember is one agent of the measured world: its key and awnId.
type worldMember struct {
	key ed25519.PrivateKey
	id  string
}

func newWorldMember(seed byte) worldMember {
	k := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	return worldMember{key: k, id: auth.AWNID(k.Public().(ed25519.PublicKey))}
}

func (m worldMember) publicKey() string {
	return base64.StdEncoding.EncodeToString(m.key.Public().(ed25519.PublicKey))
}

// worldRows are rows 4g–4l: join, send, reading 100 messages, the agents
// list, an event poll and the rate-limit check, each one request through
// its world function's Lambda entry (lambdahttp.Entry over the handler the
// function's main builds, from worldhttp.NewDeps as FromEnv does) on
// API Gateway v2 events, signed, on DynamoDB Local.
func worldRows(ctx context.Context, server *dynamolocal.Server, table string) []Row {
	method := "one signed request through the world function's Lambda entry (lambdahttp.Entry over the worldhttp handler its main builds from worldhttp.NewDeps, default rate limits) on API Gateway v2 events from cloud.BuildEvent, on DynamoDB Local; " +
		"calls and units from shared/store/dynamo/capacity; target = the cost tables of docs/worlds.md and docs/storage.md (domain calls + auth's nonce PutItem, member-key GetItem and, on limited routes, rate-limit UpdateItem)"
	const w = "bench-world"
	rows := []Row{
		{ID: "4g", Name: "DynamoDB cost: world join (new member, world-join)", Method: method},
		{ID: "4h", Name: "DynamoDB cost: world send (world-send)", Method: method},
		{ID: "4i", Name: "DynamoDB cost: world read N ≤ 100 messages (world-messages, consuming 100; and 1)", Method: method},
		{ID: "4j", Name: "DynamoDB cost: world agents list (3 members, world-agents)", Method: method},
		{ID: "4k", Name: "DynamoDB cost: world event poll (wait=0, world-events)", Method: method},
		{ID: "4l", Name: "DynamoDB cost: rate-limit check (allowed, ratelimit.Limiter alone; refused, through world-send)", Method: method},
	}
	fail := func(err error) []Row {
		for i := range rows {
			rows[i] = failed(rows[i], err)
		}
		return rows
	}

	m := capacity.New()
	st := dynamo.New(server.Client(m.Option()), table)
	deps := worldhttp.NewDeps(st, ratelimit.DefaultLimits(), "", logging.Discard(), nil)
	// A send limit of 1 over the same store: the second send of a minute
	// is refused, which is the refused check row 4l measures.
	tight := ratelimit.DefaultLimits()
	tight[ratelimit.Send] = 1
	tightDeps := worldhttp.NewDeps(st, tight, "", logging.Discard(), nil)
	box := inbox.New(deps.Store) // guarded, as the function builds it (NeedStore)
	entries := map[string]lambdahttp.Handler{}
	for name, build := range map[string]func() (http.Handler, error){
		"put": func() (http.Handler, error) { return worldhttp.NewPut(as(deps.Options, "world-put"), deps.World) },
		"join": func() (http.Handler, error) {
			return worldhttp.NewJoin(as(deps.Options, "world-join"), deps.World, deps.World)
		},
		"send":     func() (http.Handler, error) { return worldhttp.NewSend(as(deps.Options, "world-send"), box) },
		"messages": func() (http.Handler, error) { return worldhttp.NewMessages(as(deps.Options, "world-messages"), box) },
		"agents": func() (http.Handler, error) {
			return worldhttp.NewAgents(as(deps.Options, "world-agents"), deps.World)
		},
		"events": func() (http.Handler, error) { return worldhttp.NewEvents(as(deps.Options, "world-events"), deps.World) },
		"tight": func() (http.Handler, error) {
			return worldhttp.NewSend(as(tightDeps.Options, "world-send"), inbox.New(tightDeps.Store))
		},
	} {
		h, err := build()
		if err != nil {
			return fail(fmt.Errorf("worldhttp %s: %w", name, err))
		}
		entries[name] = lambdahttp.Entry(h)
	}
	owner, a, b := newWorldMember(31), newWorldMember(32), newWorldMember(33)
	joinBody := func(x worldMember) string { return fmt.Sprintf(`{"publicKey":%q}`, x.publicKey()) }
	sendBody := fmt.Sprintf(`{"to":%q,"content":{"text":"hello from make bench"}}`, b.id)

	// call sends one request and returns what it cost, or an error when
	// the answer is not want.
	call := func(entry string, k worldMember, method, target, body string, want int) (capacity.Report, error) {
		m.Reset()
		status, out, err := invokeEntry(ctx, entries[entry], k.key, method, target, body)
		if err != nil {
			return nil, err
		}
		if status != want {
			return nil, fmt.Errorf("%s %s answered %d, want %d: %s", method, target, status, want, out)
		}
		return m.Take(), nil
	}
	// The world and its members; not metered.
	setup := []struct {
		entry        string
		k            worldMember
		method, path string
		body         string
		status       int
	}{
		{"put", owner, "PUT", "/v0/worlds/" + w, fmt.Sprintf(`{"publicKey":%q,"name":"Bench"}`, owner.publicKey()), http.StatusCreated},
		{"join", owner, "POST", "/v0/worlds/" + w + "/join", joinBody(owner), http.StatusCreated},
		{"join", b, "POST", "/v0/worlds/" + w + "/join", joinBody(b), http.StatusCreated},
	}
	for _, s := range setup {
		if _, err := call(s.entry, s.k, s.method, s.path, s.body, s.status); err != nil {
			return fail(fmt.Errorf("setting up the world: %w", err))
		}
	}

	result := func(row Row, got capacity.Report, bud budget) Row {
		row.Target = bud.describe() + " per request"
		t := got.Total()
		row.Status = within(bud.allows(got.Calls()))
		row.Result = fmt.Sprintf("%s; %g read + %g write units", callsString(got.Calls()), t.ReadUnits, t.WriteUnits)
		row.Values = map[string]float64{"calls": float64(t.Calls), "read_units": t.ReadUnits, "write_units": t.WriteUnits}
		return row
	}
	measure := func(i int, bud budget, entry string, k worldMember, method, target, body string, want int) {
		got, err := call(entry, k, method, target, body, want)
		if err != nil {
			rows[i] = failed(rows[i], err)
			return
		}
		rows[i] = result(rows[i], got, bud)
	}

	// 4g: a new member joins (signed, no membership yet: no rate limit).
	measure(0, budget{calls: map[string]int{"GetItem": 3, "Query": 3, "PutItem": 1, "UpdateItem": 1, "TransactWriteItems": 1},
		text: "side by side: 3 GetItem (member, subject, manifest) + 3 Query (the key's inbox, the players' page and its webhooks) + 1 PutItem (nonce) + 1 UpdateItem (join limit); then 1 TransactWriteItems (member, key, slot, count and listing, event)"},
		"join", a, "POST", "/v0/worlds/"+w+"/join", joinBody(a), http.StatusCreated)

	// 4h: a sends b one message.
	measure(1, budget{calls: with(true, map[string]int{"TransactWriteItems": 1}),
		text: "1 TransactWriteItems (recipient check, message, event) + " + authCalls + " + 1 UpdateItem (rate limit)"},
		"send", a, "POST", "/v0/worlds/"+w+"/messages", sendBody, http.StatusCreated)

	// 4i: b consumes 100 messages in one read (99 more seeded through the
	// inbox itself, unmetered: the send limit is 30 a minute), then 1.
	readBudget := budget{calls: with(true, map[string]int{"Query": 1}), oneOf: []string{"DeleteItem", "TransactWriteItems"}, oneOfMax: 1,
		text: "1 Query + 1 write request (DeleteItem for 1, TransactWriteItems for more) + " + authCalls + " + 1 UpdateItem (rate limit)"}
	func() {
		for range inbox.MaxMessages - 1 {
			if _, err := box.Send(ctx, w, a.id, b.id, json.RawMessage(`{"text":"seeded by make bench"}`), ""); err != nil {
				rows[2] = failed(rows[2], fmt.Errorf("seeding the inbox: %w", err))
				return
			}
		}
		hundred, err := call("messages", b, "GET", "/v0/worlds/"+w+"/messages?limit=100", "", http.StatusOK)
		if err != nil {
			rows[2] = failed(rows[2], err)
			return
		}
		if _, err := box.Send(ctx, w, a.id, b.id, json.RawMessage(`{"text":"one more"}`), ""); err != nil {
			rows[2] = failed(rows[2], fmt.Errorf("seeding the inbox: %w", err))
			return
		}
		one, err := call("messages", b, "GET", "/v0/worlds/"+w+"/messages", "", http.StatusOK)
		if err != nil {
			rows[2] = failed(rows[2], err)
			return
		}
		row := result(rows[2], hundred, readBudget)
		t := one.Total()
		// DynamoDB Local reports a transaction of 100 Deletes as 2 write
		// units; AWS bills transactional writes 2 units per item (about
		// 200 here), so the units column is DynamoDB Local's, not a bill.
		row.Result = "N = 100: " + row.Result + " (as DynamoDB Local reports them; AWS bills the 100-delete transaction about 200)" +
			fmt.Sprintf("; N = 1: %s; %g read + %g write units", callsString(one.Calls()), t.ReadUnits, t.WriteUnits)
		row.Values["one_calls"], row.Values["one_read_units"], row.Values["one_write_units"] = float64(t.Calls), t.ReadUnits, t.WriteUnits
		if !readBudget.allows(one.Calls()) {
			row.Status = Missed
		}
		rows[2] = row
	}()

	// 4j: the agents list of the three members (one page).
	measure(3, budget{calls: with(true, map[string]int{"Query": 2}),
		text: "2 Query per page (members; their webhooks, side by side) + " + authCalls + " + 1 UpdateItem (rate limit)"},
		"agents", a, "GET", "/v0/worlds/"+w+"/agents", "", http.StatusOK)

	// 4k: an event poll without waiting (not rate limited). The member
	// item, read beside the head, says whether the poll changes presence:
	// a steady poll's record is an UpdateItem, a first poll's the
	// presence.changed transaction.
	measure(4, budget{calls: with(false, map[string]int{"GetItem": 3, "Query": 2, "UpdateItem": 1, "TransactWriteItems": 1}),
		text: "3 GetItem (the event head, the poller's member item and its webhook, side by side) + 2 Query (shared and private events) + 1 UpdateItem (a steady poll recorded) or 1 TransactWriteItems (the first poll's presence.changed) + " + authCalls},
		"events", b, "GET", "/v0/worlds/"+w+"/events", "", http.StatusOK)

	// 4l: the limiter's check alone, then a send it refuses.
	func() {
		check := budget{calls: map[string]int{"UpdateItem": 1}, text: "1 conditional UpdateItem, no read"}
		m.Reset()
		if err := ratelimit.New(st, ratelimit.DefaultLimits()).Allow(ctx, w, owner.id, ratelimit.Send); err != nil {
			rows[5] = failed(rows[5], fmt.Errorf("rate-limit check: %w", err))
			return
		}
		allowed := m.Take()
		// Refused: the member key (this handler has not seen the key),
		// then the send's transaction carrying the guard (nonce, count,
		// membership), which the count's condition cancels.
		refusedBudget := budget{calls: map[string]int{"GetItem": 1, "TransactWriteItems": 1}}
		// a has sent once this minute (4h); with a limit of 1 the next
		// send is refused, unless the minute just turned: then it is
		// allowed once and the one after is refused.
		var refused capacity.Report
		var err error
		for range 2 {
			if refused, err = call("tight", a, "POST", "/v0/worlds/"+w+"/messages", sendBody, http.StatusTooManyRequests); err == nil {
				break
			}
		}
		if err != nil {
			rows[5] = failed(rows[5], err)
			return
		}
		row := result(rows[5], allowed, check)
		row.Target = "1 conditional UpdateItem, no read, per check; a refused send (429): 1 GetItem (the member key) + 1 TransactWriteItems (the send with the nonce, the count and the membership check, cancelled by the count), nothing more"
		t := refused.Total()
		row.Result = "allowed: " + row.Result + fmt.Sprintf("; refused send (429): %s; %g read + %g write units", callsString(refused.Calls()), t.ReadUnits, t.WriteUnits)
		row.Values["refused_calls"] = float64(t.Calls)
		if !refusedBudget.allows(refused.Calls()) {
			row.Status = Missed
		}
		rows[5] = row
	}()
	return rows
}

// describe renders a budget's calls when it has no text of its own.
func (b budget) describe() string {
	if b.text != "" {
		return b.text
	}
	s := callsString(b.calls)
	if len(b.oneOf) > 0 {
		s += fmt.Sprintf(" + %d of %s", b.oneOfMax, strings.Join(b.oneOf, "/"))
	}
	return s
}

// as is o for the handler of function name (it serves that function's
// routes of the table).
func as(o worldhttp.Options, name string) worldhttp.Options {
	o.Function = name
	return o
}
