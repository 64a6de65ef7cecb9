package ledger_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/functions/fixture-ledger/ledger"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
)

// Overload levels of issue 9.
const (
	overloadCalls = 1000
	// overloadTimeout is each call's deadline: the ledger's Lambda timeout
	// in the route table.
	overloadTimeout = 10 * time.Second
	// overloadRetries bounds the retries of each 503'd call with a task id;
	// overloadRetriers is how many buyers retry at once.
	overloadRetries  = 10
	overloadRetriers = 16
	// taskIDEvery: one call in 10 carries a task id, 100 per shape. Nearly
	// all of them get 503 in the storm, and their retries append one at a
	// time to the hot account, which is where the test spends its time; 100
	// ids still race the late commits of their timed-out first attempts
	// (the unknown outcomes exactly-once is about) and leave 900 calls
	// without an id to show that a 503 without one recorded nothing. The
	// storm itself stays 1,000 concurrent calls.
	taskIDEvery = 10
)

// TestOverload is issue 9's must-show: 1,000 concurrent appends to one
// account on DynamoDB Local get no 500s; every 200 is in the ledger, and no
// 503'd call without a task id is. Every taskIDEvery-th call carries a task
// id; those that got 503 are retried with the same id until they settle,
// and each then has exactly one entry. Two shapes, run at the same time on
// tables of their own: one process (every call queued on one Book, as in
// the local harness) and 50 processes (Books racing optimistically, as
// Lambda instances do).
func TestOverload(t *testing.T) {
	for _, shape := range []struct {
		name      string
		processes int
	}{{"one process", 1}, {"50 processes", 50}} {
		t.Run(shape.name, func(t *testing.T) {
			// Each shape mostly waits: on its calls' deadlines, on DynamoDB
			// Local's one-at-a-time appends to the hot account, on the
			// retries' Retry-After.
			t.Parallel()
			client, table := dynamolocal.NewTable(t, local)
			st := dynamo.New(client, table)
			why := &reasons{m: map[string]int{}}
			handlers := make([]http.Handler, shape.processes)
			for i := range handlers {
				handlers[i] = ledger.New(slog.New(why), st)
			}
			account := fmt.Sprintf("hot-%d", shape.processes)
			taskID := func(i int) string {
				if i%taskIDEvery != 0 {
					return ""
				}
				return fmt.Sprintf("overload-%d", i)
			}
			input := func(i int) string {
				return fmt.Sprintf(`{"account":%q,"amount_cents":%d,"memo":"call-%d"}`, account, i+1, i)
			}
			send := func(i int) resp {
				ctx, cancel := context.WithTimeout(context.Background(), overloadTimeout)
				defer cancel()
				body := fmt.Sprintf(`{"task":"record-entry","input":%s}`, input(i))
				r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/agents/a2awire-ledger/invoke", strings.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				if id := taskID(i); id != "" {
					r.Header.Set(protocol.TaskIDHeader, id)
				}
				w := httptest.NewRecorder()
				handlers[i%len(handlers)].ServeHTTP(w, r)
				got := decode(t, w.Code, w.Header(), w.Body.Bytes(), "record-entry")
				if got.status == 503 && got.retryAfter == "" {
					t.Errorf("call %d: 503 without Retry-After", i)
				}
				return got
			}

			began := time.Now()
			out := make([]resp, overloadCalls)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range overloadCalls {
				wg.Go(func() {
					<-start
					out[i] = send(i)
				})
			}
			close(start)
			wg.Wait()
			storm := time.Since(began)

			var ok, busy int
			for i, o := range out {
				switch {
				case o.status == 200:
					ok++
				case o.status == 503 && o.code == protocol.Unavailable:
					busy++
				default:
					t.Errorf("call %d: %d %s, want 200 or 503 unavailable", i, o.status, o.body)
				}
			}
			entries := list(t, st, account)
			byMemo := map[string]ledger.Entry{}
			for _, e := range entries {
				if _, dup := byMemo[e.Memo]; dup {
					t.Fatalf("two entries for %s", e.Memo)
				}
				byMemo[e.Memo] = e
			}
			for i, o := range out {
				e, in := byMemo[fmt.Sprintf("call-%d", i)]
				switch {
				case o.status == 200 && (!in || e.EntryID != o.record.EntryID || e.Sequence != o.record.Sequence):
					t.Errorf("call %d: 200 %+v, but the ledger has %+v (present: %t)", i, o.record, e, in)
				case o.status == 503 && taskID(i) == "" && in:
					t.Errorf("call %d without a task id: 503, yet its entry %+v is in the ledger", i, e)
				}
			}

			// Retry the 503'd calls that carry a task id until they settle.
			pending := []int{}
			for i, o := range out {
				if o.status != 200 && taskID(i) != "" {
					pending = append(pending, i)
				}
			}
			retried := len(pending)
			work := make(chan int)
			var unsettled sync.Map
			var rwg sync.WaitGroup
			for range overloadRetriers {
				rwg.Go(func() {
					for i := range work {
						var last resp
						for range overloadRetries {
							if last = send(i); last.status == 200 {
								break
							}
							time.Sleep(retryWait(last))
						}
						if last.status != 200 {
							unsettled.Store(i, last)
						}
					}
				})
			}
			for _, i := range pending {
				work <- i
			}
			close(work)
			rwg.Wait()
			pending = pending[:0]
			unsettled.Range(func(k, v any) bool {
				pending = append(pending, k.(int))
				t.Logf("call %d (task id %s) unsettled: %d %s", k, taskID(k.(int)), v.(resp).status, v.(resp).body)
				return true
			})
			t.Logf("logged failures: %s", why)
			if len(pending) > 0 {
				t.Fatalf("%d calls with a task id still unsettled after %d retries each", len(pending), overloadRetries)
			}
			entries = list(t, st, account)
			withID := map[string]int{}
			var noID int
			var running, sum int64
			for k, e := range entries {
				running += e.AmountCents
				if e.Sequence != int64(k+1) || e.BalanceCents != running {
					t.Fatalf("entry %d is %+v (running balance %d)", k, e, running)
				}
				var i int
				if _, err := fmt.Sscanf(e.Memo, "call-%d", &i); err != nil {
					t.Fatalf("entry %+v: %v", e, err)
				}
				if taskID(i) != "" {
					withID[e.Memo]++
				} else {
					noID++
				}
				sum += int64(i + 1)
			}
			for i := 0; i < overloadCalls; i += taskIDEvery {
				if n := withID[fmt.Sprintf("call-%d", i)]; n != 1 {
					t.Errorf("task id %s: %d entries, want exactly 1", taskID(i), n)
				}
			}
			okNoID := 0
			for i, o := range out {
				if o.status == 200 && taskID(i) == "" {
					okNoID++
				}
			}
			if noID != okNoID {
				t.Errorf("%d entries without a task id, %d 200s without one", noID, okNoID)
			}
			t.Logf("%s, %d calls (%v deadline each): storm took %v: %d × 200, %d × 503; %d calls with a task id retried → each exactly once; ledger %d entries, balance %d",
				shape.name, overloadCalls, overloadTimeout, storm.Round(time.Millisecond), ok, busy, retried, len(entries), running)
		})
	}
}

// reasons is a slog handler that counts the failures the kit logs, by
// message and error text (digits masked), so the test can say why calls
// got 503.
type reasons struct {
	mu sync.Mutex
	m  map[string]int
}

var digits = regexp.MustCompile(`[0-9a-f]{6,}|[0-9]+`)

func (r *reasons) Enabled(context.Context, slog.Level) bool { return true }
func (r *reasons) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *reasons) WithGroup(string) slog.Handler            { return r }
func (r *reasons) Handle(_ context.Context, rec slog.Record) error {
	key := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			key += ": " + digits.ReplaceAllString(a.Value.String(), "N")
		}
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[key]++
	return nil
}

func (r *reasons) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var lines []string
	for k, n := range r.m {
		lines = append(lines, fmt.Sprintf("\n  %4d × %s", n, k))
	}
	slices.Sort(lines)
	return strings.Join(lines, "")
}

// retryWait is how long a buyer waits before retrying after r: its
// Retry-After, jittered.
func retryWait(r resp) time.Duration {
	d := time.Second
	if n, err := strconv.Atoi(r.retryAfter); err == nil && n > 0 {
		d = time.Duration(n) * time.Second
	}
	return d/2 + rand.N(d/2)
}
