package cloud_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

type echoIn struct {
	N     int    `json:"n"`
	Sleep int    `json:"sleep_ms"`
	Pad   int    `json:"pad"`
	Panic string `json:"panic"`
}

type echoOut struct {
	N         int    `json:"n"`
	Pad       string `json:"pad,omitempty"`
	RequestID string `json:"request_id"`
}

func echo(ctx context.Context, in echoIn) (echoOut, error) {
	if in.Panic != "" {
		panic(in.Panic)
	}
	if in.Sleep > 0 {
		time.Sleep(time.Duration(in.Sleep) * time.Millisecond)
	}
	lc, _ := lambdacontext.FromContext(ctx)
	return echoOut{N: in.N, Pad: strings.Repeat("x", in.Pad), RequestID: lc.AwsRequestID}, nil
}

func TestEntryRoundTripsThroughJSON(t *testing.T) {
	e := cloud.NewEntry("echo", echo, time.Second)
	out, err := e.Invoke(context.Background(), []byte(`{"n":7}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), `{"n":7,"request_id":"`) {
		t.Errorf("out = %s", out)
	}
	if _, err := e.Invoke(context.Background(), []byte(`{"n":"seven"}`)); err == nil {
		t.Error("an event the function cannot decode was accepted")
	}
}

// TestEntryConcurrentInvocationsKeepTheirOwnOutput guards the handler pool:
// a lambda.Handler reuses its output buffer, so sharing one across
// goroutines would mix up responses (and race).
func TestEntryConcurrentInvocationsKeepTheirOwnOutput(t *testing.T) {
	e := cloud.NewEntry("echo", echo, time.Second)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			for range 20 {
				out, err := e.Invoke(context.Background(), fmt.Appendf(nil, `{"n":%d,"pad":%d}`, i, 100+i))
				if err != nil || !strings.HasPrefix(string(out), fmt.Sprintf(`{"n":%d,"pad":"%s"`, i, strings.Repeat("x", 100+i))) {
					t.Errorf("invocation %d got %.40s…, %v", i, out, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestEntryTimeoutDiscardsLateResult(t *testing.T) {
	e := cloud.NewEntry("echo", echo, 100*time.Millisecond)
	start := time.Now()
	out, err := e.Invoke(context.Background(), []byte(`{"n":1,"sleep_ms":2000}`))
	if !errors.Is(err, cloud.ErrTimeout) || out != nil {
		t.Fatalf("out %s err %v, want ErrTimeout", out, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("timed out after %v, want about 100ms", d)
	}
}

func TestEntryPanicIsAnError(t *testing.T) {
	e := cloud.NewEntry("echo", echo, time.Second)
	_, err := e.Invoke(context.Background(), []byte(`{"panic":"boom"}`))
	var p *cloud.PanicError
	if !errors.As(err, &p) || p.Value != "boom" {
		t.Errorf("err = %v, want a PanicError", err)
	}
}

func TestEntryPayloadLimits(t *testing.T) {
	var called atomic.Bool
	e := cloud.NewEntry("echo", func(ctx context.Context, in echoIn) (echoOut, error) { called.Store(true); return echo(ctx, in) }, 20*time.Second)
	big := fmt.Appendf(nil, `{"n":1,"x":"%s"}`, strings.Repeat("a", cloud.MaxRequestPayload))
	if _, err := e.Invoke(context.Background(), big); !errors.Is(err, cloud.ErrRequestTooLarge) || called.Load() {
		t.Errorf("7 MB event: err %v, called %v", err, called.Load())
	}
	if _, err := e.Invoke(context.Background(), fmt.Appendf(nil, `{"pad":%d}`, cloud.MaxResponsePayload)); !errors.Is(err, cloud.ErrResponseTooLarge) {
		t.Errorf("6 MB response: err %v", err)
	}
	if _, err := e.Invoke(context.Background(), fmt.Appendf(nil, `{"pad":%d}`, 6<<20-100)); err != nil {
		t.Errorf("response just under the limit: %v", err)
	}
}

// TestEntryLateResultReachesNoOne: the handler whose function overran is
// not handed the next invocation, so its late answer cannot be mistaken
// for the next caller's, and the next caller is not kept waiting for it.
func TestEntryLateResultReachesNoOne(t *testing.T) {
	release := make(chan struct{})
	e := cloud.NewEntry("echo", func(ctx context.Context, in echoIn) (echoOut, error) {
		if in.Sleep > 0 {
			<-release
		}
		return echo(ctx, echoIn{N: in.N})
	}, 500*time.Millisecond) // ample for the quick invocations after the first
	if _, err := e.Invoke(context.Background(), []byte(`{"n":1,"sleep_ms":1}`)); !errors.Is(err, cloud.ErrTimeout) {
		t.Fatalf("err %v, want ErrTimeout", err)
	}
	for n := 2; n < 12; n++ {
		out, err := e.Invoke(context.Background(), fmt.Appendf(nil, `{"n":%d}`, n))
		if err != nil || !strings.HasPrefix(string(out), fmt.Sprintf(`{"n":%d,`, n)) {
			t.Fatalf("invocation %d after a timeout: %s, %v", n, out, err)
		}
		if n == 5 {
			close(release) // the late answer arrives mid-way
		}
	}
}

// TestEntryCallerGivingUpIsItsError: a caller's own deadline or
// cancellation is reported as the caller's, not as the function's timeout.
func TestEntryCallerGivingUpIsItsError(t *testing.T) {
	e := cloud.NewEntry("echo", echo, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := e.Invoke(ctx, []byte(`{"sleep_ms":500}`)); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, cloud.ErrTimeout) {
		t.Errorf("err %v, want the caller's deadline", err)
	}
}

// TestEntryRecoversAfterPanic: the invocation after a panic is served
// normally, by a fresh handler.
func TestEntryRecoversAfterPanic(t *testing.T) {
	e := cloud.NewEntry("echo", echo, time.Second)
	for i := range 3 {
		var p *cloud.PanicError
		if _, err := e.Invoke(context.Background(), []byte(`{"panic":"boom"}`)); !errors.As(err, &p) {
			t.Fatalf("round %d: err %v, want a PanicError", i, err)
		}
		if out, err := e.Invoke(context.Background(), []byte(`{"n":3}`)); err != nil || !strings.HasPrefix(string(out), `{"n":3,`) {
			t.Fatalf("round %d after a panic: %s, %v", i, out, err)
		}
	}
}
