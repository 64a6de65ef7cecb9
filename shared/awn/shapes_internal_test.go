package awn

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/escrowhttp"
	"github.com/a2awire/a2awire/shared/webhook"
)

// TestEscrowBodiesAreTheServers: the escrow bodies this package writes
// decode strictly, field for field, as the server's (escrowhttp), which
// this package does not link.
func TestEscrowBodiesAreTheServers(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(createBody{Provider: "p", Capability: "c", Input: json.RawMessage(`{"a":1}`), Amount: 5, Deadline: "2026-12-31T12:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	got, deadline, err := escrowhttp.DecodeCreate(b)
	if err != nil || got.Provider != "p" || got.Capability != "c" || string(got.Input) != `{"a":1}` || got.Amount != 5 || deadline.IsZero() {
		t.Errorf("the server reads %s as %+v, %v, %v", b, got, deadline, err)
	}
	b, _ = json.Marshal(grantBody{Amount: 3, Memo: "m"})
	var g escrowhttp.GrantBody
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil || g.Amount != 3 || g.Memo != "m" {
		t.Errorf("grant %s: %+v %v", b, g, err)
	}
}

// TestWebhookViewIsTheServers: what the server shows of a webhook
// (webhook.View) reads here whole.
func TestWebhookViewIsTheServers(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	v := webhook.View{URL: "https://x", Enabled: true, DisabledReason: "r", CreatedAt: at,
		Stats: webhook.Stats{Delivered: 1, Failed: 2, DeadLettered: 3, ActionsDropped: 4, LastError: "e", LastErrorAt: &at, LastSuccessAt: &at}}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var mine WebhookView
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&mine); err != nil {
		t.Fatal(err)
	}
	back, _ := json.Marshal(mine)
	if !reflect.DeepEqual(jsonMap(t, b), jsonMap(t, back)) {
		t.Errorf("server %s, read back %s", b, back)
	}
}

func jsonMap(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
