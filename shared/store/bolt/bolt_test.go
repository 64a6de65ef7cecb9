package bolt_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/bolt"
	"github.com/a2awire/a2awire/shared/store/internal/embeddedtest"
)

var ctx = context.Background()

// TestEmbedded runs the tests of what only the embedded engines do (TTL
// sweeper, feed consumers and retention, keys that must stay apart).
func TestEmbedded(t *testing.T) {
	embeddedtest.Run(t, func(t *testing.T, o embeddedtest.Options) embeddedtest.Engine {
		s, err := bolt.Open(filepath.Join(t.TempDir(), bolt.DefaultFile), bolt.WithClock(o.Now), bolt.WithSweepInterval(o.SweepEvery), bolt.WithFeedConsumers(o.Consumers...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// TestEveryCommitSyncs asserts durability directly: every write that
// commits (and every feed commit) syncs the file exactly once before it
// returns, and a write that commits nothing does not need to. If syncing
// were turned off, the counts would be zero.
func TestEveryCommitSyncs(t *testing.T) {
	var syncs atomic.Int64
	s, err := bolt.Open(filepath.Join(t.TempDir(), bolt.DefaultFile), bolt.WithSweepInterval(0),
		bolt.WithSyncWrapper(func(sync func() error) error {
			syncs.Add(1)
			return sync()
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	expect := func(what string, want int64, err error) {
		t.Helper()
		if n := syncs.Swap(0); n != want {
			t.Fatalf("%s: %d syncs, want %d (err %v)", what, n, want, err)
		}
	}
	expect("open", 1, nil)
	k := store.Key{PK: "p", SK: "s"}
	_, err = s.Write(ctx, store.Put(k, store.Item{"a": store.N(1)}))
	expect("put", 1, err)
	_, err = s.Write(ctx, store.Update(k).AddNum("a", 1), store.Put(store.Key{PK: "p", SK: "t"}, nil))
	expect("two-action write", 1, err)
	_, err = s.Write(ctx, store.Put(k, nil).When(store.ItemAbsent()))
	if !errors.Is(err, store.ErrConditionFailed) {
		t.Fatal(err)
	}
	expect("failed condition (nothing committed)", 0, err)
	recs, err := s.Read(ctx, "c", 10)
	expect("first read (registers the consumer)", 1, err)
	_, err = s.Read(ctx, "c", 10)
	expect("second read", 0, err)
	err = s.Commit(ctx, "c", recs[len(recs)-1].Change.SequenceNumber)
	expect("feed commit", 1, err)
	_, err = s.Write(ctx, store.Put(store.Key{PK: "p", SK: "old"}, store.Item{store.AttrExpiresAt: store.N(1)}))
	expect("put", 1, err)
	_, err = s.Sweep()
	expect("sweep", 1, err)
}

// TestSyncFailureIsOutcomeUnknown: a write whose sync fails after the
// commit is not acknowledged, and is not reported as "nothing written"
// either: the error wraps store.ErrOutcomeUnknown, not ErrUnavailable, and
// the committed item is there to be re-read.
func TestSyncFailureIsOutcomeUnknown(t *testing.T) {
	var fail atomic.Bool
	s, err := bolt.Open(filepath.Join(t.TempDir(), bolt.DefaultFile), bolt.WithSweepInterval(0),
		bolt.WithSyncWrapper(func(sync func() error) error {
			if fail.Load() {
				return errors.New("disk gone")
			}
			return sync()
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fail.Store(true)
	k := store.Key{PK: "p", SK: "s"}
	if _, err := s.Write(ctx, store.Put(k, nil)); !errors.Is(err, store.ErrOutcomeUnknown) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("write with a failing sync: %v, want ErrOutcomeUnknown only", err)
	}
	fail.Store(false)
	if _, err := s.Get(ctx, k); err != nil {
		t.Fatalf("the committed item, re-read: %v", err)
	}
}

// TestRestartKeepsDataAndFeed: items, consumer positions and unconsumed
// records survive Close and Open; a second Open of a file in use fails
// instead of hanging on bbolt's lock.
func TestRestartKeepsDataAndFeed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nested", "dir", bolt.DefaultFile)
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := s.Write(ctx, store.Put(store.Key{PK: "p", SK: fmt.Sprint(i)}, store.Item{"b": store.B([]byte{0, byte(i)})})); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := s.Read(ctx, "c", 2)
	if err != nil || len(recs) != 2 {
		t.Fatalf("read %d, %v", len(recs), err)
	}
	if err := s.Commit(ctx, "c", recs[1].Change.SequenceNumber); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := bolt.Open(path); err == nil {
		t.Fatal("second Open of a file in use succeeded")
	} else if time.Since(start) > 10*time.Second {
		t.Fatalf("second Open took %s", time.Since(start))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	it, err := s.Get(ctx, store.Key{PK: "p", SK: "4"})
	if err != nil || string(it.Bytes("b")) != "\x00\x04" {
		t.Fatalf("item after reopen: %v, %v", it, err)
	}
	rest, err := s.Read(ctx, "c", 10)
	if err != nil || len(rest) != 3 || rest[0].Change.Keys[store.AttrSK].String() != "2" {
		t.Fatalf("feed after reopen: %d records, %v; want the 3 uncommitted", len(rest), err)
	}
	// Sequence numbers continue after a restart instead of starting over.
	if _, err := s.Write(ctx, store.Delete(store.Key{PK: "p", SK: "0"})); err != nil {
		t.Fatal(err)
	}
	all, err := s.Read(ctx, "c", 10)
	if err != nil || len(all) != 4 || all[3].Change.SequenceNumber <= all[2].Change.SequenceNumber {
		t.Fatalf("feed after a write following the reopen: %d records, %v", len(all), err)
	}
}

// TestOldLayoutRefused: a file of the per-entity layout (version 1) is
// refused with a message saying what to do, never misread.
func TestOldLayoutRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), bolt.DefaultFile)
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("meta"))
		if err != nil {
			return err
		}
		return b.Put([]byte("version"), []byte("1"))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if s, err := bolt.Open(path); err == nil {
		s.Close()
		t.Fatal("a version 1 file was opened")
	} else if !strings.Contains(err.Error(), "delete the file") {
		t.Fatalf("refusal does not say what to do: %v", err)
	}
}

func BenchmarkBolt(b *testing.B) {
	embeddedtest.Bench(b, func(b *testing.B) store.Store {
		s, err := bolt.Open(filepath.Join(b.TempDir(), bolt.DefaultFile))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	})
}
