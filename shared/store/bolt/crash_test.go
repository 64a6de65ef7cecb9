package bolt_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	bbolt "go.etcd.io/bbolt"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/bolt"
)

// What this file proves, and what it does not: a writer process killed
// with SIGKILL loses no acknowledged write and no change record of one,
// and leaves a file bbolt can open and check. A process crash keeps the
// kernel's page cache, so this says nothing about power loss; that every
// commit is fsync'd before it is acknowledged is asserted directly by
// TestEveryCommitSyncs.

// crashChildEnv, when set to a file path, turns the test binary into the
// crash test's child: it makes acknowledged writes to that file, printing
// each, until it is killed.
const crashChildEnv = "A2AWIRE_BOLT_CRASH_CHILD"

const crashPK = "crash"

var counterKey = store.Key{PK: crashPK, SK: "counter"}

func entryKey(n int64) store.Key { return store.Key{PK: crashPK, SK: fmt.Sprintf("e%07d", n)} }

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		os.Exit(crashChild(path))
	}
	os.Exit(m.Run())
}

// crashChild resumes where the last run stopped and, for n = next, next+1,
// …, writes entry n and moves the counter to n in one two-action write
// (conditional, so no n is skipped or written twice), printing "ack n"
// after each write returns. The parent kills it with SIGKILL; if the parent
// dies first, the write to the closed pipe ends the child (SIGPIPE).
func crashChild(path string) int {
	ctx := context.Background()
	s, err := bolt.Open(path, bolt.WithSweepInterval(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var next int64 = 1
	switch it, err := s.Get(ctx, counterKey); {
	case err == nil:
		c, err := it.Int("count")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		next = c + 1
	case !errors.Is(err, store.ErrNotFound):
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("ready %d\n", next)
	for n := next; n < 1_000_000; n++ {
		counter := store.Update(counterKey).AddNum("count", 1).When(store.NotExists("count"))
		if n > 1 {
			counter = counter.When(store.Eq("count", store.N(n-1)))
		}
		_, err := s.Write(ctx,
			store.Put(entryKey(n), store.Item{"n": store.N(n), "memo": store.S(strings.Repeat("x", int(n%512)))}).When(store.ItemAbsent()),
			counter)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("ack %d\n", n)
	}
	return 0
}

// TestCrashKill9 kills a writer with SIGKILL in the middle of a stream of
// writes, three times on the same file. After each kill the file must pass
// bbolt's consistency check and reopen; every acknowledged write must be
// there, and the feed must deliver every change record of every
// acknowledged write, once, in order, across the kills.
func TestCrashKill9(t *testing.T) {
	path := filepath.Join(t.TempDir(), bolt.DefaultFile)
	const rounds, acksPerRound = 3, 150
	var acked, verified int64
	for round := 1; round <= rounds; round++ {
		last := runCrashChild(t, path, acksPerRound)
		if last < acked+acksPerRound {
			t.Fatalf("round %d: child acknowledged up to %d, want at least %d", round, last, acked+acksPerRound)
		}
		acked = last
		n := verifyCrashFile(t, path, acked, verified)
		t.Logf("round %d: acknowledged %d, on disk %d", round, acked, n)
		verified = n
	}
}

// runCrashChild starts the child on path, SIGKILLs it once it has
// acknowledged `acks` writes, reads every acknowledgement it printed before
// dying, and returns the highest one.
func runCrashChild(t *testing.T, path string, acks int) int64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var first, last int64
	var seen int
	killed := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "ready" {
			first, _ = strconv.ParseInt(f[1], 10, 64)
			continue
		}
		if len(f) != 2 || f[0] != "ack" {
			t.Fatalf("child printed %q", sc.Text())
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		if n != first+int64(seen) {
			t.Fatalf("child acknowledged %d, want %d", n, first+int64(seen))
		}
		last = n
		if seen++; seen == acks && !killed {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want killed by SIGKILL", err)
	}
	return last
}

// verifyCrashFile checks the file's page structure with bbolt, then reopens
// it with the engine: the counter and every entry up to it are there (the
// count may exceed acked by the write in flight when the kill landed), and
// the feed, read by a consumer that committed everything up to `before` in
// the previous round, delivers exactly the records of writes before+1..n.
// It returns n.
func verifyCrashFile(t *testing.T, path string, acked, before int64) int64 {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatalf("raw reopen after kill: %v", err)
	}
	err = db.View(func(tx *bbolt.Tx) error {
		var first error
		for err := range tx.Check() { // drain: Check's goroutine sends every problem
			if first == nil {
				first = err
			}
		}
		return first
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("bbolt consistency check after kill: %v", err)
	}

	s, err := bolt.Open(path, bolt.WithSweepInterval(0))
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	it, err := s.Get(ctx, counterKey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := it.Int("count")
	if err != nil || n < acked || n > acked+1 {
		t.Fatalf("counter %d (%v) on disk, %d acknowledged", n, err, acked)
	}
	var got int64
	q := store.Query{PK: crashPK, SK: store.SKPrefix("e")}
	for {
		page, err := s.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			got++
			if v, err := it.Int("n"); err != nil || v != got || it.Str(store.AttrSK) != entryKey(got).SK || len(it.Str("memo")) != int(got%512) {
				t.Fatalf("entry %d after kill: %v", got, it)
			}
		}
		if q.Cursor = page.Cursor; q.Cursor == "" {
			break
		}
	}
	if got != n {
		t.Fatalf("%d entries on disk, counter says %d", got, n)
	}

	// The feed: two records per write (the entry's INSERT, then the
	// counter's INSERT or MODIFY), nothing before `before`, nothing missing.
	var recs []events.DynamoDBEventRecord
	for int64(len(recs)) < 2*(n-before) {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		batch, err := s.Read(rctx, "verifier", 100)
		cancel()
		if err != nil {
			t.Fatalf("feed after kill: %d of %d records, then %v", len(recs), 2*(n-before), err)
		}
		recs = append(recs, batch...)
		if err := s.Commit(ctx, "verifier", batch[len(batch)-1].Change.SequenceNumber); err != nil {
			t.Fatal(err)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	extra, err := s.Read(rctx, "verifier", 100)
	cancel()
	if int64(len(recs)) != 2*(n-before) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("feed delivered %d records and then %d more (%v), want %d", len(recs), len(extra), err, 2*(n-before))
	}
	for i := int64(0); i < n-before; i++ {
		w := before + 1 + i
		entry, counter := recs[2*i], recs[2*i+1]
		if entry.EventName != store.EventInsert || entry.Change.Keys[store.AttrSK].String() != entryKey(w).SK {
			t.Fatalf("record %d: %s %v, want INSERT of %s", 2*i, entry.EventName, entry.Change.Keys, entryKey(w).SK)
		}
		wantEvent := store.EventModify
		if w == 1 {
			wantEvent = store.EventInsert
		}
		if counter.EventName != wantEvent || counter.Change.NewImage["count"].Number() != strconv.FormatInt(w, 10) {
			t.Fatalf("record %d: %s %v, want %s of the counter to %d", 2*i+1, counter.EventName, counter.Change.NewImage, wantEvent, w)
		}
	}
	return n
}
