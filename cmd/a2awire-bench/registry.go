package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/a2awire/a2awire/functions/registry/registryapi"
	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/capacity"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
)

// registryRows are rows 4e and 4f: a signed registration and a discovery
// through the registry's Lambda entry (the events the gateway builds, its
// Web Bot Auth check and nonce claim included) on DynamoDB Local.
func registryRows(ctx context.Context, server *dynamolocal.Server, table string) []Row {
	method := "the registry's Lambda entry (lambdahttp.Entry over registryapi, signature check and nonce claim included) on API Gateway v2 events from cloud.BuildEvent, on DynamoDB Local; calls and units from shared/store/dynamo/capacity; target = shared/registry's documented cost + the nonce's 1 PutItem"
	register := Row{ID: "4e", Name: "DynamoDB cost: registry register (signed, new name, 2 capabilities)", Method: method,
		Target: "1 GetItem + 1 TransactWriteItems (registry) + 1 PutItem (nonce) per request"}
	discover := Row{ID: "4f", Name: "DynamoDB cost: registry discover by capability (default status)", Method: method,
		Target: "1 Query on gsi1 (status any: up to 2) per request"}
	m := capacity.New()
	h, err := registryapi.New(registryapi.Options{Log: logging.Discard(), Store: dynamo.New(server.Client(m.Option()), table), AllowInsecureEndpoints: true})
	if err != nil {
		return []Row{failed(register, err), failed(discover, err)}
	}
	entry := lambdahttp.Entry(h)
	k := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	body, _ := json.Marshal(map[string]any{"name": "bench-agent", "description": "make bench", "endpoint": "http://127.0.0.1:9/bench",
		"capabilities": []string{"word-count", "ping"}, "public_key": base64.StdEncoding.EncodeToString(k.Public().(ed25519.PublicKey))})

	measure := func(row Row, signer ed25519.PrivateKey, method, target, body string, want int, allowed map[string]int) Row {
		m.Reset()
		status, out, err := invokeEntry(ctx, entry, signer, method, target, body)
		if err != nil {
			return failed(row, err)
		}
		if status != want {
			return failed(row, fmt.Errorf("%s %s answered %d, want %d: %s", method, target, status, want, out))
		}
		got := m.Take()
		ok := true
		for op, n := range got.Calls() {
			ok = ok && n <= allowed[op]
		}
		t := got.Total()
		row.Status = within(ok)
		row.Result = fmt.Sprintf("%s; %g read + %g write units", callsString(got.Calls()), t.ReadUnits, t.WriteUnits)
		row.Values = map[string]float64{"calls": float64(t.Calls), "read_units": t.ReadUnits, "write_units": t.WriteUnits}
		return row
	}
	return []Row{
		measure(register, k, "POST", "/api/v1/agents", string(body), http.StatusCreated, map[string]int{"GetItem": 1, "TransactWriteItems": 1, "PutItem": 1}),
		measure(discover, nil, "GET", "/api/v1/agents?capability=word-count", "", http.StatusOK, map[string]int{"Query": 2}),
	}
}

// invokeEntry sends one request (signed by k unless nil) to a Lambda entry
// as the gateway would, and returns the response's status and body; err is
// a failure to send it, not an error status.
func invokeEntry(ctx context.Context, entry lambdahttp.Handler, k ed25519.PrivateKey, method, target, body string) (status int, out string, err error) {
	const origin = "https://api.bench"
	r := httptest.NewRequestWithContext(ctx, method, origin+target, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if k != nil {
		s, err := auth.NewSigner(k)
		if err != nil {
			return 0, "", err
		}
		out, err := http.NewRequestWithContext(ctx, method, origin+target, strings.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		if err := s.Sign(out); err != nil {
			return 0, "", fmt.Errorf("sign: %w", err)
		}
		for name, v := range out.Header {
			r.Header[name] = v
		}
	}
	route, params, ok := routes.Match(method, r.URL.Path)
	if !ok {
		return 0, "", fmt.Errorf("no route for %s %s", method, r.URL.Path)
	}
	resp, err := entry(ctx, cloud.BuildEvent(r, route, params, []byte(body), time.Now()))
	if err != nil {
		return 0, "", err
	}
	return resp.StatusCode, resp.Body, nil
}
