// Package messy is the a2awire-messy fixture: a provider that is conformant
// but untidy, so buyers can test their tolerance. It echoes its
// input with extra, undocumented fields in both output and metadata, and on
// request fails with every error class a buyer must handle.
package messy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/a2awire/a2awire/shared/protocol"
)

// Name is the fixture's registered agent name.
const Name = "a2awire-messy"

// MaxDelayMS bounds input.delay_ms of simulate "slow".
const MaxDelayMS = 5000

// Simulate values, each selecting one behaviour.
const (
	SimInvalidInput = "invalid_input"  // 400 invalid_input
	SimUpstream     = "upstream_error" // 502 upstream_error
	SimUnavailable  = "unavailable"    // 503 unavailable with Retry-After: 1
	SimSlow         = "slow"           // sleep delay_ms, then succeed
)

// Model is the made-up model name messy reports in its metadata, to show
// that tokens_used and model may appear on any response.
const Model = "messy-echo-1"

// New returns the fixture's HTTP handler.
func New(log *slog.Logger) *protocol.Provider {
	p := protocol.NewProvider(Name, protocol.WithLogger(log))
	p.HandleFunc("messy-echo", echo)
	return p
}

// control is the part of the input messy itself reads; the rest is only
// echoed.
type control struct {
	Simulate *string `json:"simulate"`
	DelayMS  *int    `json:"delay_ms"`
}

// echo is registered untyped because the echo must be the input exactly as
// sent, not a re-encoding of the fields messy knows about.
func echo(ctx context.Context, input json.RawMessage) (any, error) {
	var c control
	if err := protocol.DecodeInput(input, &c); err != nil {
		return nil, protocol.Errorf(protocol.InvalidInput, "input.simulate must be a string and input.delay_ms an integer")
	}
	if c.DelayMS != nil && (*c.DelayMS < 0 || *c.DelayMS > MaxDelayMS) {
		return nil, protocol.Errorf(protocol.InvalidInput, "input.delay_ms must be between 0 and %d", MaxDelayMS)
	}
	if c.Simulate != nil {
		switch *c.Simulate {
		case SimInvalidInput:
			return nil, protocol.Errorf(protocol.InvalidInput, "simulated invalid input (input.simulate = %q)", SimInvalidInput)
		case SimUpstream:
			return nil, protocol.Errorf(protocol.Upstream, "simulated upstream failure (input.simulate = %q)", SimUpstream)
		case SimUnavailable:
			return nil, &protocol.Error{Code: protocol.Unavailable, Message: "simulated unavailability (input.simulate = \"unavailable\"); retry after 1 s", RetryAfter: time.Second}
		case SimSlow:
			if err := sleep(ctx, c.DelayMS); err != nil {
				return nil, err
			}
		default:
			return nil, protocol.Errorf(protocol.InvalidInput, "input.simulate %s is unknown; use %s, %s, %s or %s",
				protocol.Quote(*c.Simulate), SimInvalidInput, SimUpstream, SimUnavailable, SimSlow)
		}
	}

	traceID := newTraceID()
	protocol.SetMetadata(ctx, "trace_id", traceID)
	protocol.SetMetadata(ctx, "region", "xx-messy-1")
	protocol.SetMetadata(ctx, "cost_usd", 0.000042)
	protocol.SetMetadata(ctx, "tokens_used", 42)
	protocol.SetMetadata(ctx, "model", Model)
	protocol.SetMetadata(ctx, "cache", map[string]any{"hit": false, "layers": []string{"l1", "l2"}})
	return map[string]any{
		"echo":         input,
		"trace_id":     traceID,
		"note":         "fields other than echo are noise a buyer must ignore",
		"deprecated":   nil,
		"_links":       map[string]string{"self": "/agents/" + Name + "/invoke"},
		"warnings":     []string{},
		"server_epoch": time.Now().Unix(),
	}, nil
}

// sleep waits delay_ms (0 when absent), ending early with 503 when the
// request's context ends first, e.g. at the Lambda deadline.
func sleep(ctx context.Context, delayMS *int) error {
	if delayMS == nil || *delayMS == 0 {
		return nil
	}
	t := time.NewTimer(time.Duration(*delayMS) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return &protocol.Error{Code: protocol.Unavailable, Message: "the request ended before the delay elapsed", Err: ctx.Err(), RetryAfter: time.Second}
	}
}

func newTraceID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
