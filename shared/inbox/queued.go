package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	msgqueue "github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
	"github.com/a2awire/a2awire/shared/world"
)

// Batched messages
//
// One inbox written by many senders takes every message's transaction on
// the world's event head and on the recipient's check, about 500 a
// second each. A world whose owner sets BatchMessages has its messages
// queued instead, on the queue of batched actions: Submit validates the
// message as Send does, settles the request's guard (nonce, rate limit,
// membership) and puts it on the queue, answering the message as it will
// be stored (HTTP 202). The committer of queued actions commits it
// (world.Service.CommitQueued with QueuedEvent): its message.received
// with the message attached, the marker that makes a redelivery a no-op,
// and the sender's and the recipient's checks, shared by the messages of
// one transaction. The recipient's inbox and private events are written
// across the world's eventShards (the log places both by the event's id),
// so a busy inbox needs both settings.

// Manifests reads a world's manifest (world.Service.GetWorld).
type Manifests interface {
	GetWorld(ctx context.Context, id string) (world.Manifest, error)
}

// WithQueue makes Submit queue the messages of worlds that batch them
// (their manifest, read with worlds, says so) on q. Without it Submit
// sends every message at once.
func WithQueue(q world.ActionQueue, worlds Manifests) Option {
	return func(b *Inbox) { b.queue, b.worlds = q, worlds }
}

// UnbatchedTTL is how long an Inbox remembers that a world does not batch
// its messages. A send in such a world is one transaction carrying the
// request's guard, one round trip; reading the manifest first would make
// it two. So a world that starts batching has its messages sent at once
// by an instance that read it before, for at most this long (both are
// correct: batching is the world's throughput, not its semantics); one
// that stops is seen at once, since batching is never remembered.
const UnbatchedTTL = 10 * time.Second

// unbatched remembers the worlds an Inbox read as not batching their
// messages, each until a time; bounded: when full it starts over.
type unbatched struct {
	mu sync.Mutex
	m  map[string]time.Time
}

const maxUnbatched = 4096

func (u *unbatched) has(w string, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	until, ok := u.m[w]
	return ok && now.Before(until)
}

func (u *unbatched) remember(w string, until time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil || len(u.m) >= maxUnbatched {
		u.m = map[string]time.Time{}
	}
	u.m[w] = until
}

// Sent is Submit's answer: the message, and whether it was queued (it
// reaches the inbox when the committer commits it) rather than stored.
type Sent struct {
	Message
	Queued bool
}

// Submit is what POST …/messages does: Send, unless the world batches its
// messages and the inbox has a queue (WithQueue) — then the same
// validation, the request's guard settled (so a refused nonce, a rate
// limit or a lost membership is answered now), and the message put on the
// queue; a recipient who is not a member is NotFound, as Send answers it
// (one who leaves after the request drops the message at the commit).
// Cost: Send's, in a world this Inbox read as not batching within
// UnbatchedTTL; else the manifest's GetItem and the recipient's
// membership's (2 for one older than the agent's index of worlds) side by
// side, the request's guard written beside them, then Send's without the
// guard, or when queued 1 SendMessage.
func (b *Inbox) Submit(ctx context.Context, w, from, to string, content json.RawMessage, contentType string) (Sent, error) {
	m, err := b.prepare(w, from, to, content, contentType)
	if err != nil {
		return Sent{}, err
	}
	if b.queue == nil || b.plain.has(w, m.SentAt) {
		m, err := b.commit(ctx, w, m)
		return Sent{Message: m}, err
	}
	// The manifest, and beside it the recipient's membership, which a
	// batching world answers now (a message to a non-member is 404, as
	// Send answers it): one round trip, the request's guard written
	// beside the reads. An unbatched world does not need the second read;
	// it costs one read unit once per UnbatchedTTL.
	var (
		man        world.Manifest
		werr, merr error
		wg         sync.WaitGroup
	)
	wg.Go(func() { man, werr = b.worlds.GetWorld(ctx, w) })
	wg.Go(func() { merr = b.isMember(guard.Without(ctx), w, to) })
	wg.Wait()
	if werr != nil {
		return Sent{}, werr
	}
	if !man.BatchMessages {
		b.plain.remember(w, m.SentAt.Add(UnbatchedTTL))
		m, err := b.commit(ctx, w, m)
		return Sent{Message: m}, err
	}
	if err := guard.Settle(ctx); err != nil {
		return Sent{}, apierror.FromStore("send message", err)
	}
	if merr != nil {
		return Sent{}, merr
	}
	body, err := json.Marshal(world.QueuedAction{
		Kind: world.KindMessage, World: w, ActionID: m.ID, AWNID: m.From,
		To: m.To, Content: m.Content, ContentType: m.ContentType, SentAt: m.SentAt.UnixNano(),
	})
	if err != nil {
		return Sent{}, apierror.Wrap(apierror.Internal, err, "internal error; try again later")
	}
	if err := b.queue.Send(ctx, msgqueue.Message{Body: string(body)}); err != nil {
		return Sent{}, apierror.Wrap(apierror.Unavailable, fmt.Errorf("queue message: %w", err), "the service is busy; retry shortly")
	}
	return Sent{Message: m, Queued: true}, nil
}

// isMember is nil when awnID is a member of w: its entry in the agent's
// index of worlds is there, or (a membership older than the index) its
// member item; NotFound when neither is.
func (b *Inbox) isMember(ctx context.Context, w, awnID string) error {
	_, err := b.store.Get(ctx, world.MemberCheck(w, awnID).Key)
	if errors.Is(err, store.ErrNotFound) {
		_, err = b.store.Get(ctx, world.MemberKey(w, awnID))
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return notMember(awnID)
	default:
		return apierror.FromStore("read member", err)
	}
}

// QueuedEvent is the event a queued message commits as (the committer's
// world.WithQueuedMessages): its message.received, created now, with the
// message attached as Submit made it. Content that Submit would not have
// accepted is Invalid: it can never commit.
func (b *Inbox) QueuedEvent(q world.QueuedAction, now time.Time) (world.Event, error) {
	body, err := checkContent(q.Content)
	if err != nil {
		return world.Event{}, err
	}
	if err := checkContentType(q.ContentType); err != nil {
		return world.Event{}, err
	}
	m := Message{ID: q.ActionID, From: q.AWNID, To: q.To, Content: body, ContentType: q.ContentType, SentAt: time.Unix(0, q.SentAt).UTC()}
	return b.event(q.World, m, now)
}
