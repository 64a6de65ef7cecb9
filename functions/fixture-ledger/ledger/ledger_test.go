package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/functions/fixture-ledger/ledger"
	"github.com/a2awire/a2awire/shared/idempotency"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/store/storetest/stores"
)

// local is the DynamoDB Local server of this package's tests.
var local *dynamolocal.Server

func TestMain(m *testing.M) {
	os.Exit(dynamolocal.Main(m, func(s *dynamolocal.Server) { local = s }))
}

// list returns what was really appended to account.
func list(t *testing.T, st store.Store, account string) []ledger.Entry {
	t.Helper()
	es, err := ledger.NewBook(st).List(context.Background(), account)
	if err != nil {
		t.Fatalf("list %q: %v", account, err)
	}
	return es
}

type resp struct {
	status   int
	body     string
	replayed bool
	code     protocol.Code
	record   ledger.RecordOutput
	balance  ledger.BalanceOutput
	// retryAfter is the Retry-After header.
	retryAfter string
}

// call sends one invocation to h and checks it against the protocol's rules.
func call(t *testing.T, h http.Handler, taskID, task, input string) resp {
	t.Helper()
	body := fmt.Sprintf(`{"task":%q,"input":%s}`, task, input)
	r := httptest.NewRequest(http.MethodPost, "/agents/a2awire-ledger/invoke", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if taskID != "" {
		r.Header.Set(protocol.TaskIDHeader, taskID)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return decode(t, w.Code, w.Header(), w.Body.Bytes(), task)
}

func decode(t *testing.T, status int, header http.Header, body []byte, task string) resp {
	t.Helper()
	if err := protocol.Verify(status, header, body, protocol.Expect{Agent: ledger.Name, Capability: task}); err != nil {
		t.Errorf("response %d %s is not conformant: %v", status, body, err)
	}
	out := resp{status: status, body: string(body), replayed: header.Get(protocol.ReplayedHeader) == "true",
		retryAfter: header.Get("Retry-After")}
	var eb protocol.ErrorBody
	_ = json.Unmarshal(body, &eb)
	out.code = eb.Error
	var ok struct{ Output json.RawMessage }
	_ = json.Unmarshal(body, &ok)
	_ = json.Unmarshal(ok.Output, &out.record)
	_ = json.Unmarshal(ok.Output, &out.balance)
	return out
}

func TestRecordEntryValidation(t *testing.T) {
	h := ledger.New(logging.Discard(), memory.New())
	long := strings.Repeat("é", ledger.MaxAccountChars)
	tests := []struct {
		name   string
		input  string
		status int
	}{
		{"ok", `{"account":"a","amount_cents":1}`, 200},
		{"negative ok", `{"account":"a","amount_cents":-1}`, 200},
		{"max amount", `{"account":"a","amount_cents":1000000000}`, 200},
		{"min amount", `{"account":"a","amount_cents":-1000000000}`, 200},
		{"memo", `{"account":"a","amount_cents":5,"memo":"lunch 🍜"}`, 200},
		{"128-character account", fmt.Sprintf(`{"account":%q,"amount_cents":1}`, long), 200},
		{"missing account", `{"amount_cents":1}`, 400},
		{"empty account", `{"account":"","amount_cents":1}`, 400},
		{"blank account", `{"account":"  ","amount_cents":1}`, 400},
		{"129-character account", fmt.Sprintf(`{"account":%q,"amount_cents":1}`, long+"x"), 400},
		{"account not a string", `{"account":7,"amount_cents":1}`, 400},
		{"missing amount", `{"account":"a"}`, 400},
		{"zero amount", `{"account":"a","amount_cents":0}`, 400},
		{"amount over 10^9", `{"account":"a","amount_cents":1000000001}`, 400},
		{"amount under -10^9", `{"account":"a","amount_cents":-1000000001}`, 400},
		{"fractional amount", `{"account":"a","amount_cents":1.5}`, 400},
		{"exponent amount", `{"account":"a","amount_cents":1e3}`, 400},
		{"string amount", `{"account":"a","amount_cents":"100"}`, 400},
		{"huge amount", `{"account":"a","amount_cents":1e400}`, 400},
		{"memo not a string", `{"account":"a","amount_cents":1,"memo":5}`, 400},
		{"memo too long", fmt.Sprintf(`{"account":"a","amount_cents":1,"memo":%q}`, strings.Repeat("m", ledger.MaxMemoChars+1)), 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := call(t, h, "", "record-entry", tt.input)
			if got.status != tt.status {
				t.Fatalf("status %d, want %d: %s", got.status, tt.status, got.body)
			}
			if tt.status == 400 && got.code != protocol.InvalidInput {
				t.Errorf("error %q, want invalid_input", got.code)
			}
		})
	}
	for _, input := range []string{`{}`, `{"account":""}`, `{"account":5}`, fmt.Sprintf(`{"account":%q}`, long+"x")} {
		if got := call(t, h, "", "balance", input); got.status != 400 || got.code != protocol.InvalidInput {
			t.Errorf("balance %s: %d %s", input, got.status, got.body)
		}
	}
	if got := call(t, h, "", "transfer", `{}`); got.status != 400 || got.code != protocol.UnsupportedCapability {
		t.Errorf("unknown capability: %d %s", got.status, got.body)
	}
}

// TestLedger runs the ledger's behaviour on every store.
func TestLedger(t *testing.T) {
	for _, s := range stores.All(local) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			t.Run("appends and balances", func(t *testing.T) { t.Parallel(); testAppend(t, s.Open(t)) })
			t.Run("repeated task id appends once", func(t *testing.T) { t.Parallel(); testRepeat(t, s.Open(t)) })
			t.Run("lost idempotency record still appends once", func(t *testing.T) { t.Parallel(); testLostRecord(t, s.Open(t)) })
			t.Run("concurrent distinct tasks", func(t *testing.T) { t.Parallel(); testDistinct(t, s.Open(t)) })
		})
	}
}

func testAppend(t *testing.T, st store.Store) {
	h := ledger.New(logging.Discard(), st)
	if got := call(t, h, "", "balance", `{"account":"alice"}`); got.status != 200 || got.balance != (ledger.BalanceOutput{Account: "alice"}) {
		t.Fatalf("unknown account: %d %s", got.status, got.body)
	}
	amounts := []int64{1250, -250, 1_000_000_000, -5}
	var sum int64
	for i, a := range amounts {
		sum += a
		got := call(t, h, "", "record-entry", fmt.Sprintf(`{"account":"alice","amount_cents":%d,"memo":"entry %d"}`, a, i))
		if got.status != 200 {
			t.Fatalf("entry %d: %d %s", i, got.status, got.body)
		}
		r := got.record
		if r.Account != "alice" || r.Sequence != int64(i+1) || r.BalanceCents != sum || !strings.HasPrefix(r.EntryID, "e-") {
			t.Fatalf("entry %d: %+v, want sequence %d balance %d and a random id", i, r, i+1, sum)
		}
	}
	// The same body without a task id is a new entry each time.
	again := call(t, h, "", "record-entry", `{"account":"alice","amount_cents":-5,"memo":"entry 3"}`)
	if again.record.Sequence != 5 || again.replayed {
		t.Fatalf("repeat without task id: %s", again.body)
	}
	sum -= 5
	got := call(t, h, "", "balance", `{"account":"alice"}`)
	if want := (ledger.BalanceOutput{Account: "alice", BalanceCents: sum, Entries: 5}); got.balance != want {
		t.Fatalf("balance %+v, want %+v", got.balance, want)
	}
	if got := call(t, h, "", "balance", `{"account":"bob"}`); got.balance != (ledger.BalanceOutput{Account: "bob"}) {
		t.Fatalf("other account: %s", got.body)
	}
}

func testRepeat(t *testing.T, st store.Store) {
	h := ledger.New(logging.Discard(), st)
	in := `{"account":"carol","amount_cents":700,"memo":"rent"}`
	first := call(t, h, "task-1", "record-entry", in)
	if first.status != 200 || first.replayed || !strings.HasPrefix(first.record.EntryID, "t-") {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	again := call(t, h, "task-1", "record-entry", in)
	if again.status != 200 || !again.replayed || again.body != first.body {
		t.Fatalf("repeat: %d replayed=%v %s, want the first body replayed", again.status, again.replayed, again.body)
	}
	reused := call(t, h, "task-1", "record-entry", `{"account":"carol","amount_cents":701,"memo":"rent"}`)
	if reused.status != 409 || reused.code != protocol.IdempotencyKeyReused {
		t.Fatalf("reused id: %d %s", reused.status, reused.body)
	}
	long := call(t, h, strings.Repeat("k", 256), "record-entry", in)
	if long.status != 400 || long.code != protocol.InvalidInput {
		t.Fatalf("task id over 255: %d %s", long.status, long.body)
	}
	if entries := list(t, st, "carol"); len(entries) != 1 {
		t.Fatalf("%d entries, want 1", len(entries))
	}
	if b := call(t, h, "", "balance", `{"account":"carol"}`); b.balance.BalanceCents != 700 || b.balance.Entries != 1 {
		t.Fatalf("balance %s", b.body)
	}
}

// testLostRecord: once the idempotency record is gone (here: expired), a
// repeat runs again, and the entry id derived from the task id keeps the
// append exactly-once; the response is the same entry.
func testLostRecord(t *testing.T, st store.Store) {
	now := time.Now()
	clock := func() time.Time { return now }
	h := ledger.New(logging.Discard(), st, ledger.WithClock(clock), ledger.WithIdempotencyOptions(idempotency.WithTTL(time.Minute)))
	in := `{"account":"dave","amount_cents":300,"memo":"gym"}`
	first := call(t, h, "task-9", "record-entry", in)
	if first.status != 200 {
		t.Fatalf("first: %s", first.body)
	}
	call(t, h, "", "record-entry", `{"account":"dave","amount_cents":1}`) // a later entry
	now = now.Add(time.Minute)                                            // the idempotency record expires
	again := call(t, h, "task-9", "record-entry", in)
	if again.status != 200 || again.replayed || again.record != first.record {
		t.Fatalf("re-run after expiry: %d replayed=%v %+v, want the first entry %+v", again.status, again.replayed, again.record, first.record)
	}
	now = now.Add(time.Minute)
	reused := call(t, h, "task-9", "record-entry", `{"account":"dave","amount_cents":999,"memo":"gym"}`)
	if reused.status != 409 || reused.code != protocol.IdempotencyKeyReused {
		t.Fatalf("id reused for another amount after expiry: %d %s", reused.status, reused.body)
	}
	if entries := list(t, st, "dave"); len(entries) != 2 {
		t.Fatalf("%d entries, want 2", len(entries))
	}
}

// testDistinct: concurrent entries under distinct task ids all land, with
// gap-free sequences and the right final balance.
func testDistinct(t *testing.T, st store.Store) {
	h := ledger.New(logging.Discard(), st)
	const n = 20
	var wg sync.WaitGroup
	seqs := make([]int64, n)
	for i := range n {
		wg.Go(func() {
			got := call(t, h, fmt.Sprintf("task-%d", i), "record-entry", fmt.Sprintf(`{"account":"erin","amount_cents":%d}`, i+1))
			if got.status != 200 {
				t.Errorf("task %d: %d %s", i, got.status, got.body)
			}
			seqs[i] = got.record.Sequence
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, s := range seqs {
		seen[s] = true
	}
	for s := int64(1); s <= n; s++ {
		if !seen[s] {
			t.Errorf("sequence %d missing: %v", s, seqs)
		}
	}
	if b := call(t, h, "", "balance", `{"account":"erin"}`); b.balance.BalanceCents != n*(n+1)/2 || b.balance.Entries != n {
		t.Fatalf("balance %s", b.body)
	}
}

// TestConcurrentRetries is the must-show of the fixtures issue: 50
// concurrent requests with one task id to record-entry, over real HTTP,
// append exactly one entry on every store, and every response is the same
// 200 body or 409 request_in_progress.
func TestConcurrentRetries(t *testing.T) {
	for _, s := range stores.All(local) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			st := s.Open(t)
			srv := httptest.NewServer(ledger.New(logging.Discard(), st))
			defer srv.Close()
			const n = 50
			body := `{"task":"record-entry","input":{"account":"frank","amount_cents":4200,"memo":"once"}}`
			var (
				wg    sync.WaitGroup
				start = make(chan struct{})
				out   = make([]resp, n)
			)
			client := srv.Client()
			client.Transport.(*http.Transport).MaxIdleConnsPerHost = n
			for i := range n {
				wg.Go(func() {
					req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set(protocol.TaskIDHeader, "retry-storm-1")
					<-start
					res, err := client.Do(req)
					if err != nil {
						t.Errorf("request %d: %v", i, err)
						return
					}
					defer res.Body.Close()
					raw, _ := io.ReadAll(res.Body)
					out[i] = decode(t, res.StatusCode, res.Header, raw, "record-entry")
				})
			}
			close(start)
			wg.Wait()

			var fresh, replayed, busy int
			var okBody string
			for i, o := range out {
				switch {
				case o.status == 200:
					if okBody == "" {
						okBody = o.body
					} else if o.body != okBody {
						t.Errorf("response %d: 200 body %s differs from %s", i, o.body, okBody)
					}
					if o.replayed {
						replayed++
					} else {
						fresh++
					}
				case o.status == 409 && o.code == protocol.RequestInProgress:
					busy++
				default:
					t.Errorf("response %d: %d %s, want 200 or 409 request_in_progress", i, o.status, o.body)
				}
			}
			entries := list(t, st, "frank")
			if len(entries) != 1 || fresh != 1 {
				t.Fatalf("%d entries and %d fresh 200s, want exactly 1 of each", len(entries), fresh)
			}
			// Once settled, a retry gets the one entry's response.
			after := call(t, srv.Config.Handler, "retry-storm-1", "record-entry", `{"account":"frank","amount_cents":4200,"memo":"once"}`)
			if after.status != 200 || !after.replayed || after.body != okBody {
				t.Fatalf("settled retry: %d replayed=%v %s", after.status, after.replayed, after.body)
			}
			t.Logf("%s: %d requests → 1 entry (sequence %d, balance %d); 1 ran, %d replayed, %d request_in_progress",
				s.Name, n, entries[0].Sequence, entries[0].BalanceCents, replayed, busy)
		})
	}
}
