package world_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/world"
)

// stalling holds its first Write until release is closed, telling entered
// when it starts: a batch stuck in the store.
type stalling struct {
	store.Store
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (s *stalling) Write(ctx context.Context, acts ...store.Action) ([]store.Item, error) {
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.entered)
		<-s.release
	}
	return s.Store.Write(ctx, acts...)
}

// TestCommitGivesUpBeforeDeadline: a commit queued behind a stuck one
// leaves the queue a margin before its caller's deadline, answering
// ErrUnavailable (nothing written, retry) in time for a Lambda to answer
// 503 instead of timing out, and its event is never written later.
func TestCommitGivesUpBeforeDeadline(t *testing.T) {
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	st := &stalling{Store: mem, entered: make(chan struct{}), release: make(chan struct{})}
	log := world.NewLog(st, nil, nil)
	ev := func() world.Event {
		return world.Event{Type: world.PresenceChanged, World: "lobby", Data: json.RawMessage(`{}`), Visibility: world.Public}
	}
	firstDone := make(chan error, 1)
	go func() {
		_, err := log.Commit(context.Background(), ev())
		firstDone <- err
	}()
	<-st.entered

	deadline := time.Now().Add(1500 * time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	// The stuck batch ends after the deadline: a queued commit that waited
	// for it would answer too late.
	stuck := time.AfterFunc(time.Until(deadline)+300*time.Millisecond, func() { close(st.release) })
	defer stuck.Stop()
	_, err := log.Commit(ctx, ev())
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("queued commit: %v, want ErrUnavailable", err)
	}
	if left := time.Until(deadline); left < 500*time.Millisecond {
		t.Errorf("queued commit answered %v before its deadline, want about a second", left)
	}

	if err := <-firstDone; err != nil {
		t.Fatalf("first commit: %v", err)
	}
	page, err := mem.Query(context.Background(), store.Query{PK: world.SharedEventsPK("lobby"), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 {
		t.Fatalf("the world holds %d events, want only the first commit's", len(page.Items))
	}
}
