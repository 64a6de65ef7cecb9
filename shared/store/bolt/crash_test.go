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

	bbolt "go.etcd.io/bbolt"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/bolt"
)

// crashChildEnv, when set to a file path, turns the test binary into the
// crash test's child: it appends ledger entries to that file and prints each
// acknowledged one until it is killed.
const crashChildEnv = "A2AWIRE_BOLT_CRASH_CHILD"

const crashAccount = "crash"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		os.Exit(crashChild(path))
	}
	os.Exit(m.Run())
}

// crashChild resumes the ledger where the last run stopped and appends
// entry n with amount n forever, printing "ack <sequence> <balance>" after
// each append returns. The parent kills it with SIGKILL; if the parent dies
// first, the write to the closed pipe ends the child (SIGPIPE).
func crashChild(path string) int {
	ctx := context.Background()
	s, err := bolt.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	next := int64(1)
	switch b, err := s.LedgerBalance(ctx, crashAccount); {
	case err == nil:
		next = b.Entries + 1
	case !errors.Is(err, store.ErrNotFound):
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("ready %d\n", next)
	for n := next; n < 1_000_000; n++ {
		e, err := s.AppendLedger(ctx, store.LedgerEntry{
			Account: crashAccount, EntryID: "e" + strconv.FormatInt(n, 10), AmountCents: n,
			Memo: strings.Repeat("x", int(n%512)), CreatedAt: time.Unix(n, 0),
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("ack %d %d\n", e.Sequence, e.BalanceCents)
	}
	return 0
}

// TestCrashKill9 kills a writer with SIGKILL in the middle of a stream of
// appends, three times on the same file. After each kill the file must pass
// bbolt's consistency check, reopen, and hold every acknowledged entry with
// sequences 1..n and no gaps.
func TestCrashKill9(t *testing.T) {
	path := filepath.Join(t.TempDir(), bolt.DefaultFile)
	const rounds, acksPerRound = 3, 150
	var acked int64
	for round := 1; round <= rounds; round++ {
		last := runCrashChild(t, path, acksPerRound)
		if last < acked+acksPerRound {
			t.Fatalf("round %d: child acknowledged up to %d, want at least %d", round, last, acked+acksPerRound)
		}
		acked = last
		n := verifyCrashFile(t, path, acked)
		t.Logf("round %d: acknowledged %d, on disk %d", round, acked, n)
	}
}

// runCrashChild starts the child on path, SIGKILLs it once it has
// acknowledged `acks` appends, reads every acknowledgement it printed before
// dying, and returns the highest acknowledged sequence.
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
		if len(f) != 3 || f[0] != "ack" {
			t.Fatalf("child printed %q", sc.Text())
		}
		seq, _ := strconv.ParseInt(f[1], 10, 64)
		bal, _ := strconv.ParseInt(f[2], 10, 64)
		if seq != first+int64(seen) || bal != seq*(seq+1)/2 {
			t.Fatalf("child acknowledged sequence %d balance %d, want sequence %d balance %d", seq, bal, first+int64(seen), seq*(seq+1)/2)
		}
		last = seq
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
// it with the adapter and checks every acknowledged entry is there, in
// order, with consistent balances. It returns the number of entries on disk
// (it may exceed acked by the append in flight when the kill landed).
func verifyCrashFile(t *testing.T, path string, acked int64) int64 {
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

	s, err := bolt.Open(path)
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	es, err := s.ListLedger(ctx, crashAccount)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(es))
	if n < acked || n > acked+1 {
		t.Fatalf("%d entries on disk, %d acknowledged", n, acked)
	}
	for i, e := range es {
		seq := int64(i + 1)
		if e.Sequence != seq || e.EntryID != "e"+strconv.FormatInt(seq, 10) || e.AmountCents != seq ||
			e.BalanceCents != seq*(seq+1)/2 || len(e.Memo) != int(seq%512) || !e.CreatedAt.Equal(time.Unix(seq, 0)) {
			t.Fatalf("entry %d after kill: %+v", seq, e)
		}
	}
	b, err := s.LedgerBalance(ctx, crashAccount)
	if err != nil || b.Entries != n || b.BalanceCents != n*(n+1)/2 {
		t.Fatalf("balance after kill: %+v, %v; want %d entries", b, err, n)
	}
	return n
}
