package main

import (
	"errors"
	"testing"
	"time"
)

// TestPairedStarts: the baseline starts right before every other target,
// the warm-up round is not counted, each ratio is over the baseline start
// just before it (not the baseline's median), and a target whose start
// failed is not started again.
func TestPairedStarts(t *testing.T) {
	targets := []coldTarget{{name: "base"}, {name: "a"}, {name: "b"}}
	var order []string
	calls := 0
	broken := errors.New("b failed")
	start := func(c coldTarget) (coldSample, error) {
		order = append(order, c.name)
		calls++
		if c.name == "b" && calls > 4 {
			return coldSample{}, broken // b's counted start fails
		}
		// The machine slows by 1 ms per start: a pair sees the same
		// machine, medians of each target do not.
		d := time.Duration(calls) * time.Millisecond
		if c.name == "a" {
			d *= 2
		}
		return coldSample{init: d}, nil
	}
	samples, ratios, errs := pairedStarts(targets, 2, start)
	want := []string{"base", "a", "base", "b", "base", "a", "base", "b", "base", "a", "base"}
	if len(order) != len(want) {
		t.Fatalf("start order %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("start order %v, want %v", order, want)
		}
	}
	// Counted rounds: base at calls 5, 7, 9, 11; a at 6 and 10 (2× its call).
	if got := ratios["a"]; len(got) != 2 || got[0] != 12.0/5 || got[1] != 20.0/9 {
		t.Errorf(`ratios["a"] = %v, want [12/5 20/9]`, got)
	}
	if got := len(samples["base"]); got != 4 {
		t.Errorf("baseline samples = %d, want 4 (warm-up round dropped)", got)
	}
	if got := len(samples["a"]); got != 2 {
		t.Errorf(`samples["a"] = %d, want 2`, got)
	}
	if len(ratios["b"]) != 0 || len(samples["b"]) != 0 || !errors.Is(errs["b"], broken) {
		t.Errorf("b: ratios %v, samples %v, err %v; want none, none, its error", ratios["b"], samples["b"], errs["b"])
	}
}

// TestRetryPortTaken: a lost port is retried, at most three times; any
// other outcome is returned at once.
func TestRetryPortTaken(t *testing.T) {
	failed := errors.New("invoke answered 500")
	for _, c := range []struct {
		name      string
		results   []error
		wantCalls int
		wantErr   error // nil: no error
	}{
		{"taken twice, then started", []error{errPortTaken, errPortTaken, nil}, 3, nil},
		{"always taken", []error{errPortTaken, errPortTaken, errPortTaken, nil}, 3, errPortTaken},
		{"another failure", []error{failed, nil}, 1, failed},
	} {
		calls := 0
		_, err := retryPortTaken(func() (coldSample, error) {
			err := c.results[calls]
			calls++
			return coldSample{init: time.Millisecond}, err
		})
		if calls != c.wantCalls {
			t.Errorf("%s: %d calls, want %d", c.name, calls, c.wantCalls)
		}
		if c.wantErr == nil && err != nil || c.wantErr != nil && !errors.Is(err, c.wantErr) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.wantErr)
		}
	}
}

// TestPortTaken: the emulator's own line for a port it could not bind
// (copied from a run where it happened) is recognised; its ordinary start
// is not.
func TestPortTaken(t *testing.T) {
	lost := "03 Dec 2026 11:36:40,308 [PANIC] (rapid) Runtime API Server failed to listen error=listen tcp 127.0.0.1:46499: bind: address already in use\npanic: (*log"
	if !portTaken(lost) {
		t.Errorf("portTaken(%q) = false", lost)
	}
	ok := "03 Dec 2026 11:36:40,306 [INFO] (rapid) exec '/tmp/cr2/cold/hello/bootstrap' (cwd=/tmp/cr2/cold/hello, handler=)"
	if portTaken(ok) {
		t.Errorf("portTaken(%q) = true", ok)
	}
}
