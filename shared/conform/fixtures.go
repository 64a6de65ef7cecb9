package conform

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/a2awire/a2awire/shared/protocol"
)

// Fixture names, in the order `awn conform --fixtures` checks them.
const (
	Punctual   = "a2awire-punctual"
	Clean      = "a2awire-clean"
	Messy      = "a2awire-messy"
	Translator = "a2awire-translator"
	Ledger     = "a2awire-ledger"
)

// FixtureEndpoint is where a fixture is served below a deployment's base URL.
func FixtureEndpoint(baseURL, name string) string {
	return strings.TrimRight(baseURL, "/") + "/agents/" + name + "/invoke"
}

// Fixtures returns the five fixture providers at baseURL as targets with
// built-in good and bad inputs. Each call draws a fresh ledger account, so
// runs never see each other's entries and the ledger's effect count starts
// from a known state.
func Fixtures(baseURL string) []Target {
	account := "conform-" + protocol.NewTaskID()[:13]
	ledger := FixtureEndpoint(baseURL, Ledger)
	return []Target{
		{
			Endpoint: FixtureEndpoint(baseURL, Punctual), Agent: Punctual, Task: "ping",
			// ping takes any input, so the bad values go to its other capability.
			Input: raw(`{}`), BadTask: "latency-benchmark", BadInput: raw(`{"delay_ms":-1}`),
		},
		{
			Endpoint: FixtureEndpoint(baseURL, Clean), Agent: Clean, Task: "word-count",
			Input: raw(`{"text":"hello world"}`), BadInput: raw(`{"text":5}`),
		},
		{
			Endpoint: FixtureEndpoint(baseURL, Messy), Agent: Messy, Task: "messy-echo",
			Input: raw(`{"x":1}`), BadInput: raw(`{"simulate":"invalid_input"}`),
		},
		{
			Endpoint: FixtureEndpoint(baseURL, Translator), Agent: Translator, Task: "translation",
			Input: raw(`{"text":"hello","target_lang":"es"}`), BadInput: raw(`{"text":"hello","target_lang":"xx"}`),
		},
		{
			Endpoint: ledger, Agent: Ledger, Task: "record-entry", Stateful: true,
			Input:    raw(fmt.Sprintf(`{"account":%q,"amount_cents":100}`, account)),
			BadInput: raw(`{"account":"a","amount_cents":0}`),
			Effects: func(ctx context.Context, hc *http.Client) (int64, error) {
				return LedgerEntries(ctx, hc, ledger, account)
			},
		},
	}
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// LedgerEntries asks the ledger fixture's balance capability how many entries
// account has. It accepts entries as a count or as a list, and is the
// ledger's Effects hook: a repeated task id must add exactly one.
func LedgerEntries(ctx context.Context, hc *http.Client, endpoint, account string) (int64, error) {
	body := mustJSON(map[string]any{"task": "balance", "input": map[string]string{"account": account}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("balance: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return 0, fmt.Errorf("balance: read: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("balance answered %s", seen(exchange{status: resp.StatusCode, body: b}))
	}
	var r struct {
		Output struct {
			Entries json.RawMessage `json:"entries"`
		} `json:"output"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, fmt.Errorf("balance: %w", err)
	}
	var n int64
	if err := json.Unmarshal(r.Output.Entries, &n); err == nil {
		return n, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(r.Output.Entries, &list); err == nil && list != nil {
		return int64(len(list)), nil
	}
	return 0, fmt.Errorf("balance: output.entries is %s, want a count or a list", clip(string(r.Output.Entries), 60))
}
