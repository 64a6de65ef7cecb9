// Package punctual is the a2awire-punctual fixture: a stateless provider with
// two capabilities that exercises routing on task and timing.
package punctual

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/a2awire/a2awire/shared/protocol"
)

// Name is the fixture's registered agent name.
const Name = "a2awire-punctual"

// Limits of latency-benchmark's input.
const (
	MaxDelayMS      = 5000
	MaxPayloadBytes = 65536
)

// New returns the fixture's HTTP handler.
func New(log *slog.Logger) *protocol.Provider {
	p := protocol.NewProvider(Name, protocol.WithLogger(log))
	protocol.Handle(p, "ping", ping)
	protocol.Handle(p, "latency-benchmark", latencyBenchmark)
	return p
}

// PingInput is ping's input.
type PingInput struct {
	Echo json.RawMessage `json:"echo"`
}

// PingOutput is ping's output; echo is left out when the input had none.
type PingOutput struct {
	Pong       bool            `json:"pong"`
	Echo       json.RawMessage `json:"echo,omitempty"`
	ServerTime string          `json:"server_time"`
}

func ping(_ context.Context, in PingInput) (PingOutput, error) {
	return PingOutput{Pong: true, Echo: in.Echo, ServerTime: time.Now().UTC().Format(time.RFC3339Nano)}, nil
}

// BenchmarkInput is latency-benchmark's input; both fields default to 0.
type BenchmarkInput struct {
	DelayMS      int `json:"delay_ms"`
	PayloadBytes int `json:"payload_bytes"`
}

// BenchmarkOutput reports the requested and the measured delay.
type BenchmarkOutput struct {
	DelayMS  int    `json:"delay_ms"`
	ActualMS int64  `json:"actual_ms"`
	Payload  string `json:"payload"`
}

const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

func latencyBenchmark(ctx context.Context, in BenchmarkInput) (BenchmarkOutput, error) {
	if in.DelayMS < 0 || in.DelayMS > MaxDelayMS {
		return BenchmarkOutput{}, protocol.Errorf(protocol.InvalidInput, "input.delay_ms must be between 0 and %d", MaxDelayMS)
	}
	if in.PayloadBytes < 0 || in.PayloadBytes > MaxPayloadBytes {
		return BenchmarkOutput{}, protocol.Errorf(protocol.InvalidInput, "input.payload_bytes must be between 0 and %d", MaxPayloadBytes)
	}
	start := time.Now()
	if in.DelayMS > 0 {
		t := time.NewTimer(time.Duration(in.DelayMS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return BenchmarkOutput{}, &protocol.Error{Code: protocol.Unavailable, Message: "the request ended before the delay elapsed", Err: ctx.Err(), RetryAfter: time.Second}
		}
	}
	payload := strings.Repeat(alphabet, in.PayloadBytes/len(alphabet)+1)[:in.PayloadBytes]
	return BenchmarkOutput{DelayMS: in.DelayMS, ActualMS: time.Since(start).Milliseconds(), Payload: payload}, nil
}
