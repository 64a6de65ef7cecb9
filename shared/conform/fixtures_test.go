package conform_test

import (
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/conform"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// TestFixturesPass: every fixture passes the whole checklist through the
// in-process API Gateway, with the inputs `awn conform --fixtures` uses, and
// does all the network asks beyond it (no item carries a note).
func TestFixturesPass(t *testing.T) {
	t.Parallel()
	gw, err := harness.New(harness.Options{Log: slog.New(slog.DiscardHandler), Store: memory.New()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	targets := conform.Fixtures(srv.URL)
	if len(targets) != 5 {
		t.Fatalf("%d fixtures, want 5", len(targets))
	}
	for _, tg := range targets {
		t.Run(tg.Agent, func(t *testing.T) {
			t.Parallel()
			checks := run(t, tg)
			if bad := having(checks, conform.Fail); len(bad) > 0 || len(having(checks, conform.Skip)) > 0 {
				t.Fatalf("want every item to pass:%s", report(checks))
			}
			if n := noted(checks); len(n) > 0 {
				t.Fatalf("notes on %v:%s", n, report(checks))
			}
		})
	}
}
