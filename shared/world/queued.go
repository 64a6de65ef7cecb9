package world

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/a2awire/a2awire/shared/apierror"
	msgqueue "github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
)

// Batched actions
//
// A world's event head takes one commit at a time (DynamoDB refuses a
// transaction while another is in progress on one of its items) and about
// 500 transactional writes a second, so a world whose members act
// thousands of times a second cannot commit each action in a transaction
// of its own. A world whose owner sets BatchActions has its actions
// queued instead: Act validates the action, settles the request's guard
// (nonce, rate limit, membership) and puts a QueuedAction on the action
// queue, answering its actionId at once (HTTP 202). The committer
// (functions/world-commit) takes the queue's messages in large batches
// and hands them to CommitQueued, which commits each world's in
// transactions of up to 100 actions: one update of the head, and per
// action its event's Put, its member's MemberCheck (one per distinct
// member of the transaction) and the Put of a marker that the action
// committed. The queue delivers at least once; the marker, conditioned on
// its absence, makes a redelivered action a no-op. So 33 actions of
// distinct members commit in one transaction (1 + 3 × 33 = 100), 39 when
// every member acts twice (1 + 19 × 5), up to 49 of one member.
//
// A member who left between the queue and the commit fails its check
// and its action is dropped (it was a member's only while it was one); a
// world deleted meanwhile drops its actions (its head refuses every
// commit). Other failures leave the message on the queue for another
// try, and after 5 receives on its dead-letter queue.
//
// A world whose owner sets BatchMessages has its direct messages queued
// the same way (package inbox's Inbox.Submit) and committed by the same
// committer beside its actions: per message, the Put of its
// message.received with the message attached (the log places it in the
// recipient's inbox shard), the marker, and the checks of the sender and
// of the recipient, each once per transaction. So the messages of many
// senders to one recipient commit 24 to a transaction (2 + 4 × 24 = 98),
// and the head and the recipient's check take 2 units per 24 messages.
// A recipient who left before the commit drops the message (NotFound),
// as a sender who left does (NotJoined).

// QueuedMarkerTTL is how long the marker of a committed queued action is
// kept: longer than any message lives (4 days on the action queue and on
// its dead-letter queue, which counts from the first send: the route
// table's queue table), so no redelivery or redrive finds it gone.
const QueuedMarkerTTL = 4*24*time.Hour + time.Hour

// Items of queued actions.
const (
	// TypeActionMarker is the type of a committed queued action's marker.
	TypeActionMarker = "actionmarker"
	markerPrefix     = "ACTIONDONE#"
	markerSK         = "DONE"
)

// ActionMarkerKey is the key of the marker that world's queued action
// actionID committed: a partition of its own, so a busy world's markers
// spread over as many partitions as it has actions.
func ActionMarkerKey(world, actionID string) store.Key {
	return store.Key{PK: markerPrefix + world + "#" + actionID, SK: markerSK}
}

// KindMessage is the Kind of a queued direct message.
const KindMessage = "message"

// QueuedAction is an action, or a direct message, waiting on the action
// queue: the queue message's body is its JSON.
type QueuedAction struct {
	// Kind is "" for an action, KindMessage for a direct message.
	Kind  string `json:"kind,omitempty"`
	World string `json:"world"`
	// ActionID is the id of the queued write: the action's, or the
	// message's.
	ActionID string `json:"actionId"`
	// AWNID is the member acting, or the message's sender.
	AWNID  string          `json:"awnId"`
	Action string          `json:"action,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Via    string          `json:"via,omitempty"`
	// A message's recipient, content (JSON, as package inbox validated
	// it), contentType and sentAt (Unix nanoseconds: the request's).
	To          string          `json:"to,omitempty"`
	Content     json.RawMessage `json:"content,omitempty"`
	ContentType string          `json:"contentType,omitempty"`
	SentAt      int64           `json:"sentAt,omitempty"`
	// Redelivered: the queue has handed this message out before (its
	// receive count), so it may have committed already. Not part of the
	// body.
	Redelivered bool `json:"-"`
}

// ActionQueue is where Act puts the actions of worlds that batch them
// (a queue.Queue: Amazon SQS in AWS, the harness's in-process queue).
type ActionQueue interface {
	Send(ctx context.Context, msgs ...msgqueue.Message) error
}

// WithActionQueue sets the queue of batched actions. Without one, Act
// commits every action at once, whatever the world asks.
func WithActionQueue(q ActionQueue) Option { return func(s *Service) { s.actionQueue = q } }

// WithQueuedMessages sets how CommitQueued makes the event of a queued
// direct message (package inbox's Inbox.QueuedEvent: its message.received
// with the message attached). Without it, a queued message fails as the
// store being unavailable would, and stays on the queue.
func WithQueuedMessages(event func(q QueuedAction, now time.Time) (Event, error)) Option {
	return func(s *Service) { s.queuedMessage = event }
}

// Submitted is Act's answer: the action's id, and whether it was queued
// (its event commits later) rather than committed.
type Submitted struct {
	ActionID string
	Queued   bool
}

// Act is what POST …/actions does: SubmitAction, unless the world batches
// its actions and the service has an action queue — then the same
// validation, the request's guard settled (so a refused nonce, a rate
// limit or a lost membership is answered now), and the action put on the
// queue, its id answered with Queued. Cost when queued: SubmitAction's
// GetItem, the guard's own calls, 1 SendMessage.
func (s *Service) Act(ctx context.Context, world, awnID, action string, params json.RawMessage) (Submitted, error) {
	p, m, err := s.prepare(ctx, world, awnID, action, params)
	if err != nil {
		return Submitted{}, err
	}
	if !m.BatchActions || s.actionQueue == nil {
		id, err := s.commitAction(ctx, world, awnID, action, p, "")
		return Submitted{ActionID: id}, err
	}
	if err := guard.Settle(ctx); err != nil {
		return Submitted{}, apierror.FromStore("submit action", err)
	}
	q := QueuedAction{World: world, ActionID: s.ids.New(s.now().UTC()), AWNID: awnID, Action: action, Params: p}
	body, err := json.Marshal(q)
	if err != nil {
		return Submitted{}, internal(err)
	}
	if err := s.actionQueue.Send(ctx, msgqueue.Message{Body: string(body)}); err != nil {
		return Submitted{}, apierror.Wrap(apierror.Unavailable, fmt.Errorf("queue action: %w", err), "the service is busy; retry shortly")
	}
	return Submitted{ActionID: q.ActionID, Queued: true}, nil
}

// ParseQueuedAction reads a message body Act wrote; Invalid when it is not
// one (it can never commit).
func ParseQueuedAction(body string) (QueuedAction, error) {
	var q QueuedAction
	if err := json.Unmarshal([]byte(body), &q); err != nil {
		return QueuedAction{}, invalid("queued action: %v", err)
	}
	if _, err := ulid.ParseStrict(q.ActionID); err != nil || !validMember(q.World, q.AWNID) {
		return QueuedAction{}, invalid("queued action: not one Act wrote")
	}
	switch q.Kind {
	case "":
		if !actionNameShape.Match(q.Action) {
			return QueuedAction{}, invalid("queued action: not one Act wrote")
		}
		if _, err := jsonObject("params", q.Params, MaxParamsBytes); err != nil {
			return QueuedAction{}, err
		}
	case KindMessage:
		// The content is package inbox's to check (QueuedEvent), as it
		// was at the request.
		if !ValidAWNID(q.To) || q.Action != "" || q.Params != nil || !json.Valid(q.Content) {
			return QueuedAction{}, invalid("queued message: not one Submit wrote")
		}
	default:
		return QueuedAction{}, invalid("queued write: unknown kind %s", apierror.Quote(q.Kind))
	}
	return q, nil
}

// committerWorlds is how many worlds CommitQueued commits at once: each
// world's commits go one after another (its head), worlds need not.
const committerWorlds = 8

// CommitQueued commits queued actions and messages, each world's in as
// few transactions as fit (Log.CommitEach), and answers each: nil when it
// committed now or before (its marker was there: a redelivery); NotJoined
// when its member (a message's sender) left before the commit, NotFound
// when its world was deleted or a message's recipient left, Invalid when
// a message's content is not what Submit accepts (all final: the write is
// dropped); any other error (the store busy, an outcome unknown) is worth
// another try. An action's event is an agents-visible action.submitted as
// SubmitAction's, created now; a message's is WithQueuedMessages'.
//
// Cost per transaction: 1 TransactWriteItems of the head's update and, per
// action, its event's Put and its marker's Put (a message's item besides),
// and one MemberCheck per distinct member (2 write units each action in
// AWS).
func (s *Service) CommitQueued(ctx context.Context, qs []QueuedAction) []error {
	errs := make([]error, len(qs))
	var worlds []string
	byWorld := map[string][]int{}
	for i, q := range qs {
		if _, ok := byWorld[q.World]; !ok {
			worlds = append(worlds, q.World)
		}
		byWorld[q.World] = append(byWorld[q.World], i)
	}
	sem := make(chan struct{}, committerWorlds)
	var wg sync.WaitGroup
	for _, w := range worlds {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s.commitWorld(ctx, w, qs, byWorld[w], errs)
		})
	}
	wg.Wait()
	return errs
}

// commitWorld commits the actions at idx of qs, all of world w, answering
// each in errs.
func (s *Service) commitWorld(ctx context.Context, w string, qs []QueuedAction, idx []int, errs []error) {
	idx = s.skipCommitted(ctx, w, qs, idx)
	// A write fails on the first condition it finds, so a message whose
	// sender and recipient both lack their index entries finds one per
	// round: 3 rounds restore both and commit. Each member is restored
	// once; its check failing in a later round is final.
	restoredAt := map[string]int{}
	for round := 0; len(idx) > 0 && round < 3; round++ {
		now := s.now().UTC()
		evs := make([]Event, 0, len(idx))
		with := make([][]store.Action, 0, len(idx))
		var ok []int
		for _, i := range idx {
			q := qs[i]
			ev, err := s.queuedEvent(q, now)
			if err != nil {
				errs[i] = err
				continue
			}
			marker := store.Put(ActionMarkerKey(w, q.ActionID), store.Item{
				AttrType:            store.S(TypeActionMarker),
				store.AttrExpiresAt: store.ExpiresAt(now.Add(QueuedMarkerTTL)),
			}).When(store.ItemAbsent())
			acts := []store.Action{MemberCheck(w, q.AWNID), marker}
			if q.Kind == KindMessage && q.To != q.AWNID { // a Write names an item once
				acts = append(acts, MemberCheck(w, q.To))
			}
			evs, with, ok = append(evs, ev), append(with, acts), append(ok, i)
		}
		var again []int
		for j, err := range s.log.CommitEach(ctx, evs, with) {
			i := ok[j]
			var cf *store.ConditionFailedError
			switch {
			case err == nil:
				errs[i] = nil
			case errors.As(err, &cf) && cf.Action == 1:
				errs[i] = nil // committed before: a redelivery
			case errors.As(err, &cf) && (cf.Action == 0 || cf.Action == 2):
				// A membership older than the agent's index of worlds
				// has no entry to check: written from the member
				// item, the write goes again (once).
				a := qs[i].AWNID
				if cf.Action == 2 {
					a = qs[i].To
				}
				if r, done := restoredAt[a]; done && r == round || !done && RestoreIndexEntry(ctx, s.store, w, a) {
					restoredAt[a] = round
					again = append(again, i)
					continue
				}
				if cf.Action == 2 {
					errs[i] = apierror.New(apierror.NotFound, "agent %s is not a member of this world", apierror.Quote(a))
					continue
				}
				errs[i] = notJoined(w)
			case apierror.KindOf(err) == apierror.NotFound:
				errs[i] = err
			default:
				errs[i] = fmt.Errorf("world %s: commit queued action %s: %w", w, qs[i].ActionID, err)
			}
		}
		idx = again
	}
}

// queuedEvent is the event q commits as: its action.submitted, created
// now, or its message's message.received.
func (s *Service) queuedEvent(q QueuedAction, now time.Time) (Event, error) {
	if q.Kind != KindMessage {
		ev, err := s.ids.NewEvent(q.World, ActionSubmitted, Agents, "", submittedData{ActionID: q.ActionID, AWNID: q.AWNID, Action: q.Action, Params: q.Params, Via: q.Via}, now)
		if err != nil {
			return Event{}, internal(err)
		}
		return ev, nil
	}
	if s.queuedMessage == nil {
		return Event{}, fmt.Errorf("world %s: queued message %s: no message committer: %w", q.World, q.ActionID, store.ErrUnavailable)
	}
	return s.queuedMessage(q, now)
}

// markerReads is how many markers skipCommitted reads at once.
const markerReads = 16

// skipCommitted answers nil for the redelivered actions at idx whose
// marker is there, and returns the others. A marker found in a commit
// leaves its action out of that transaction and writes the rest again, one
// transaction per marker: a whole batch handed out again (a committer that
// timed out after its commits) would cost as many transactions as actions.
// A read of each redelivered action's marker first costs 1 GetItem (½ read
// unit) each instead; a first delivery is rarely a duplicate and is not
// read. Cost: 1 GetItem per redelivered action, 16 at once.
func (s *Service) skipCommitted(ctx context.Context, w string, qs []QueuedAction, idx []int) []int {
	found := make([]bool, len(idx))
	sem := make(chan struct{}, markerReads)
	var wg sync.WaitGroup
	for j, i := range idx {
		if !qs[i].Redelivered {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, err := s.store.Get(ctx, ActionMarkerKey(w, qs[i].ActionID))
			found[j] = err == nil
		})
	}
	wg.Wait()
	out := idx[:0:0]
	for j, i := range idx {
		if !found[j] { // found: committed before, its answer stays nil
			out = append(out, i)
		}
	}
	return out
}

// Dropped reports whether err, an answer of CommitQueued, is final: the
// action can never commit (its member left, its world is gone, it is not
// an action Act wrote), so its message is deleted rather than tried again.
func Dropped(err error) bool {
	if err == nil {
		return false
	}
	switch apierror.KindOf(err) {
	case apierror.NotJoined, apierror.NotFound, apierror.Invalid:
		return true
	}
	return false
}
