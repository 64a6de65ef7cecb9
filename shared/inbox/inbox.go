// Package inbox is the direct-message relay of a world: a member sends a
// JSON message to another member, the world keeps it in the recipient's
// inbox and tells the recipient with a private message.received event, and
// the recipient reads its inbox, consuming what it reads unless it peeks.
// It is written over the item API (store.Store), so it runs on memory, bolt
// and DynamoDB alike.
//
// # Items
//
//	item       pk                          sk               type
//	message    INBOX#<world>#<awnId>       MSG#<messageId>  message
//	 (sharded) INBOX#<world>#<awnId>#s<n>  MSG#<messageId>  message  (n in 1..shards-1)
//
// The message id is a ULID, so sort-key order is sending order, in one
// partition and across them. A message item holds messageId, world, from,
// to, content (the JSON text), contentType, sentAt (Unix nanoseconds) and
// expiresAt (sentAt + 7 days). The partitions belong to this package
// alone; leaving a world deletes them whole (world.InboxPK).
//
// A world whose owner set eventShards K spreads each inbox over K
// partitions as it spreads its events, so that many senders flooding one
// recipient write K partitions, not one: a message is the attachment of
// its message.received (world.Attachment), which the world's log puts in
// the shard of the recipient's inbox that the event's id picks among the
// count its commit was made under (world.ShardPK; shard 0 is the
// unsharded partition). The count only grows and the event head names it,
// so every message is in a shard the head names: a Read learns the count
// from the head and reads them all. A message is deleted by the key it was
// read from, never one recomputed from its id, since one written under a
// smaller count is in another shard than the count now picks.
//
// # The 100-message cap
//
// An inbox holds at most 100 messages: the visible inbox is, by definition,
// the newest 100 unexpired message items of the partition. Send never reads
// the partition (a cap enforced at send time would need a read or a shared
// counter item, and concurrent sends into one inbox would then collide), so
// a send beyond 100 writes its item like any other and the oldest message
// is dropped at that moment: no Read returns it again, peeking or not.
// Dropped items are deleted physically by the next consuming Read that sees
// them (before it consumes anything, so that consuming never lets a dropped
// message back into the newest 100), or by the TTL sweeper after 7 days, or
// when the recipient leaves. A Read that peeks never writes.
//
// # Costs
//
// Send is one write request: a TransactWriteItems of ConditionChecks that
// the recipient and the sender are members, the Put of the message and
// the Put of its event. Read is one Query (backward, newest first, at
// most 101 items: the visible 100 and one that shows whether any were
// dropped; more pages only when those items exceed 1 MB) beside one
// GetItem of the world's event head (for its count of shards: one round
// trip either way); in a world of K event shards, K-1 more such Queries
// side by side once the head is in (a second round trip), the newest 101
// of them all kept. A consuming Read adds one write: a DeleteItem for one
// message, a TransactWriteItems of one conditional Delete per message
// otherwise. Only when the Queries show dropped messages does a consuming
// Read spend more: per shard, side by side, one Query and one Write of up
// to 100 Deletes per 100 dropped messages.
//
// # Exactly once
//
// A consuming Read deletes what it returns in one Write, each Delete
// conditioned on the message still existing. Of two concurrent readers that
// picked the same message one Write succeeds and the other fails whole;
// the loser queries again and retries, so no message is returned twice and
// none is lost. Retries are bounded: readers that keep racing for the same
// inbox while messages keep arriving may get Unavailable (503 with
// Retry-After), having consumed nothing.
package inbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"mime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/ident"
	"github.com/a2awire/a2awire/shared/jsonlen"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/world"
)

// Limits of a message and of a read.
const (
	// MaxMessages is how many messages an inbox holds; older ones are
	// dropped.
	MaxMessages = 100
	// MaxContentBytes bounds a message's JSON content.
	MaxContentBytes = 64 << 10
	// MaxContentTypeLen bounds contentType (characters).
	MaxContentTypeLen = 100
	// DefaultContentType is the contentType of a message sent without one.
	DefaultContentType = "application/json"
	// PreviewLen is the most characters of the event's preview.
	PreviewLen = 100
	// DefaultLimit and MaxLimit bound the messages of one Read.
	DefaultLimit = 50
	MaxLimit     = 100
	// MaxReadBytes is the default ReadOptions.MaxBytes: how many bytes the
	// messages of one Read may take in the answer that carries them, as
	// the client receives it (ReadOptions.Size). 100 messages of 64 KiB
	// would not fit in a Lambda response (6 MiB), and a consumed message
	// that cannot be delivered would be lost. The rest waits for the next
	// Read.
	MaxReadBytes = 4 << 20
	// TTL is how long a message waits in an inbox before it expires.
	TTL = 7 * 24 * time.Hour
	// maxAttempts bounds a consuming Read's retries after a concurrent
	// reader took some of its messages; retryPause is the most it waits
	// (at random, times the attempt) before looking again, so that racing
	// readers stop picking the same messages in lockstep.
	maxAttempts = 10
	retryPause  = 2 * time.Millisecond
)

// TypeMessage is the type attribute of message items.
const TypeMessage = "message"

const (
	msgPrefix = "MSG#"
	// msgEnd sorts after every message sort key ('~' follows the ULID
	// alphabet), closing the Query's sort-key range.
	msgEnd = msgPrefix + "~"

	attrMessageID   = "messageId"
	attrWorld       = "world"
	attrFrom        = "from"
	attrTo          = "to"
	attrContent     = "content"
	attrContentType = "contentType"
	attrSentAt      = "sentAt"
)

// Message is one direct message.
type Message struct {
	// ID is a ULID: its order is sending order.
	ID string `json:"messageId"`
	// From and To are the sender's and recipient's awnIds.
	From string `json:"from"`
	To   string `json:"to"`
	// Content is the message's JSON value, compacted.
	Content     json.RawMessage `json:"content"`
	ContentType string          `json:"contentType"`
	SentAt      time.Time       `json:"sentAt"`
}

// ReadOptions select what a Read returns.
type ReadOptions struct {
	// Peek returns messages without consuming them.
	Peek bool
	// Since keeps only messages sent after it; zero keeps all.
	Since time.Time
	// Limit is the most messages returned: 0 means DefaultLimit; 1 to
	// MaxLimit are accepted.
	Limit int
	// Size is how many bytes m adds to the answer that carries the read,
	// as the client receives it. Nil measures m's JSON (Message's tags)
	// as it travels inside the Lambda proxy response's body string
	// (jsonlen.Escaped), plus a separator. A route passes its own,
	// exact measure of what it writes.
	Size func(m Message) int
	// MaxBytes bounds the sum of Size over the messages returned; the
	// first message is returned whatever its size (one message of 64 KiB
	// takes at most about 460 KB however it escapes). 0 means
	// MaxReadBytes.
	MaxBytes int
}

// defaultSize is ReadOptions.Size when none is given.
func defaultSize(m Message) int {
	b, err := json.Marshal(m)
	if err != nil {
		// Strings, a time and valid JSON content always encode; count
		// the stored bytes at their worst escaping rather than fail.
		return 7*(len(m.Content)+len(m.ContentType)) + 256
	}
	return jsonlen.Escaped(b) + len(",")
}

// Inbox sends and reads direct messages over a store. It holds no mutable
// state of its own; one Inbox serves any number of concurrent requests.
type Inbox struct {
	store store.Store
	now   func() time.Time
	ids   *world.IDs
	// log commits each message's event; one per Inbox, so concurrent sends
	// of a process share its per-world queue and what it learned of the
	// head's lead over this clock.
	log *world.Log
	// queue and worlds: Submit queues the messages of worlds that batch
	// them (queued.go); nil: it sends every message at once.
	queue  world.ActionQueue
	worlds Manifests
	// plain: the worlds read as not batching, for UnbatchedTTL.
	plain unbatched
}

// Option configures an Inbox.
type Option func(*Inbox)

// WithClock replaces time.Now (sentAt, expiry).
func WithClock(now func() time.Time) Option {
	return func(b *Inbox) {
		if now != nil {
			b.now = now
		}
	}
}

// WithIDs sets the ULID source of message and event ids, e.g. the one a
// process shares with package world so its ids increase together.
func WithIDs(ids *world.IDs) Option {
	return func(b *Inbox) {
		if ids != nil {
			b.ids = ids
		}
	}
}

// New returns an Inbox over st.
func New(st store.Store, opts ...Option) *Inbox {
	if st == nil {
		panic("inbox: nil store")
	}
	b := &Inbox{store: st, now: time.Now, ids: world.NewIDs()}
	for _, o := range opts {
		o(b)
	}
	b.log = world.NewLog(st, b.ids, b.now)
	return b
}

// MessageKey is the key of message id in awnID's inbox of w.
func MessageKey(w, awnID, id string) store.Key {
	return store.Key{PK: world.InboxPK(w, awnID), SK: msgPrefix + id}
}

// attachment is m's item as its message.received carries it: the log
// puts it in the recipient's inbox, in the shard the event's goes to.
func attachment(w string, m Message) *world.Attachment {
	k := MessageKey(w, m.To, m.ID)
	return &world.Attachment{PK: k.PK, SK: k.SK, Item: encode(w, m)}
}

// received is the data of a message.received event.
type received struct {
	MessageID   string `json:"messageId"`
	From        string `json:"from"`
	ContentType string `json:"contentType"`
	Preview     string `json:"preview"`
}

// mediaTypeName is each half of a MIME type's type/subtype: an RFC 6838
// name, ^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$ (package ident: no regular
// expression to compile at a cold start; the tests hold isMediaType to the
// whole expression). Parameters are checked by mime.ParseMediaType.
var mediaTypeName = ident.MediaTypeName

// isMediaType reports whether base is type/subtype of RFC 6838 names.
func isMediaType(base string) bool {
	typ, sub, ok := strings.Cut(base, "/")
	return ok && mediaTypeName.Match(typ) && mediaTypeName.Match(sub)
}

// Send stores a message from → to (both awnIds) in world's inbox of to, with its private
// message.received event {messageId, from, contentType, preview} for to,
// in one Write. A malformed world or sender is NotJoined and a malformed
// recipient NotFound, without a store call. content is any JSON value but null (at most
// MaxContentBytes; stored compacted); contentType defaults to
// DefaultContentType and must look like a MIME type. A recipient that is
// not a member of world → NotFound; a sender that is not one when the
// message is written (its leave raced the send) → NotJoined: both are
// conditions of the write itself, not of a check before it. Cost: one
// TransactWriteItems through the world's event log (world.MemberCheck of
// the recipient and of the sender, each in its own agent's partition, the
// message Put, the event Put and the event head's Update).
func (b *Inbox) Send(ctx context.Context, w, from, to string, content json.RawMessage, contentType string) (Message, error) {
	m, err := b.prepare(w, from, to, content, contentType)
	if err != nil {
		return Message{}, err
	}
	return b.commit(ctx, w, m)
}

// prepare validates a message as Send does and makes it, sent now.
func (b *Inbox) prepare(w, from, to string, content json.RawMessage, contentType string) (Message, error) {
	if !world.ValidID(w) || !world.ValidAWNID(from) {
		return Message{}, notJoined() // no such id can have joined
	}
	if to == "" {
		return Message{}, apierror.New(apierror.Invalid, "to is required: the recipient's awnId")
	}
	if !world.ValidAWNID(to) {
		return Message{}, notMember(to) // no such id can have joined: no store call
	}
	body, err := checkContent(content)
	if err != nil {
		return Message{}, err
	}
	if contentType == "" {
		contentType = DefaultContentType
	}
	if err := checkContentType(contentType); err != nil {
		return Message{}, err
	}
	now := b.now().UTC()
	return Message{ID: b.ids.New(now), From: from, To: to, Content: body, ContentType: contentType, SentAt: now}, nil
}

// event is m's message.received in world w, created at, m attached.
func (b *Inbox) event(w string, m Message, at time.Time) (world.Event, error) {
	ev, err := b.ids.NewEvent(w, world.MessageReceived, world.Private, m.To,
		received{MessageID: m.ID, From: m.From, ContentType: m.ContentType, Preview: preview(m.Content)}, at)
	if err != nil {
		return world.Event{}, apierror.Wrap(apierror.Internal, err, "internal error; try again later")
	}
	ev.Attach = attachment(w, m)
	return ev, nil
}

// commit writes a prepared message: Send's write.
func (b *Inbox) commit(ctx context.Context, w string, m Message) (Message, error) {
	from, to := m.From, m.To
	ev, err := b.event(w, m, m.SentAt)
	if err != nil {
		return Message{}, err
	}
	with := []store.Action{world.MemberCheck(w, to)}
	sender := -1
	if from != to { // one transaction may not name an item twice
		sender = len(with)
		with = append(with, world.MemberCheck(w, from))
	}
	_, err = b.log.Commit(ctx, ev, with...)
	var cf *store.ConditionFailedError
	// A membership older than the agent's index of worlds: its entry
	// restored, the send is written again (the recipient's and the
	// sender's may both be missing).
	for range 2 {
		if !errors.As(err, &cf) || !(cf.Action == 0 && world.RestoreIndexEntry(ctx, b.store, w, to) ||
			cf.Action == sender && world.RestoreIndexEntry(ctx, b.store, w, from)) {
			break
		}
		_, err = b.log.Commit(ctx, ev, with...)
	}
	switch {
	case err == nil:
		return m, nil
	case errors.As(err, &cf) && cf.Action == sender:
		return Message{}, notJoined() // the sender's leave came first
	case errors.As(err, &cf) && cf.Action == 0:
		if from == to {
			return Message{}, notJoined()
		}
		return Message{}, notMember(to)
	default:
		return Message{}, apierror.FromStore("send message", err)
	}
}

func notMember(awnID string) error {
	shown := apierror.Quote(awnID)
	if world.ValidAWNID(awnID) {
		shown = strconv.Quote(awnID) // well-formed: short enough to show whole
	}
	return apierror.New(apierror.NotFound, "agent %s is not a member of this world", shown)
}

func notJoined() error {
	return apierror.New(apierror.NotJoined, "you are not a member of this world; join it first")
}

// checkContent validates content and returns it compacted. Its size is
// that of the compact text as the client wrote it (json.Compact escapes
// nothing: "‹" counts its three UTF-8 bytes, "\u2039" six), which is what
// is stored and read back. A number beyond a 64-bit float's range is
// refused: the recipient's reader (encoding/json into any, JavaScript)
// could not decode the message, which a read consumes.
func checkContent(content json.RawMessage) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(content)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return nil, apierror.New(apierror.Invalid, "content is required: any JSON value but null")
	}
	if !utf8.Valid(content) {
		return nil, apierror.New(apierror.Invalid, "content must be a JSON value in UTF-8")
	}
	// Compact parses the text, so it is also the check that content is
	// JSON at all.
	var buf bytes.Buffer
	if err := json.Compact(&buf, content); err != nil {
		return nil, apierror.New(apierror.Invalid, "content must be a JSON value in UTF-8")
	}
	if buf.Len() > MaxContentBytes {
		return nil, &apierror.Error{Kind: apierror.TooLarge,
			Message: fmt.Sprintf("content is %d bytes of compact JSON; at most %d (64 KiB) are accepted", buf.Len(), MaxContentBytes)}
	}
	if path, ok := protocol.NumberOutOfRange(buf.Bytes()); ok {
		return nil, apierror.New(apierror.Invalid, "%s is a number beyond the range of a 64-bit float (about ±1.8e308); send it as a string",
			apierror.Quote("content"+path))
	}
	return json.RawMessage(buf.Bytes()), nil
}

func checkContentType(ct string) error {
	if utf8.RuneCountInString(ct) > MaxContentTypeLen {
		return apierror.New(apierror.Invalid, "contentType is %d characters; at most %d are accepted", utf8.RuneCountInString(ct), MaxContentTypeLen)
	}
	base, _, err := mime.ParseMediaType(ct)
	if err != nil || !isMediaType(base) || strings.IndexFunc(ct, notPrintableASCII) >= 0 {
		return apierror.New(apierror.Invalid, "contentType must be a MIME type such as \"application/json\" or \"text/plain; charset=utf-8\", not %s", apierror.Quote(ct))
	}
	return nil
}

// notPrintableASCII is true for control characters and non-ASCII, which
// mime.ParseMediaType trims or lets through in quoted parameter values.
func notPrintableASCII(r rune) bool { return r < 0x20 || r > 0x7e }

// preview is the content's JSON text cut to PreviewLen characters, never
// inside a UTF-8 sequence.
func preview(content json.RawMessage) string {
	s := string(content)
	n := 0
	for i := range s {
		if n == PreviewLen {
			return s[:i]
		}
		n++
	}
	return s
}

func encode(w string, m Message) store.Item {
	return store.Item{
		world.AttrType:      store.S(TypeMessage),
		attrMessageID:       store.S(m.ID),
		attrWorld:           store.S(w),
		attrFrom:            store.S(m.From),
		attrTo:              store.S(m.To),
		attrContent:         store.S(string(m.Content)),
		attrContentType:     store.S(m.ContentType),
		attrSentAt:          store.N(m.SentAt.UnixNano()),
		store.AttrExpiresAt: store.ExpiresAt(m.SentAt.Add(TTL)),
	}
}

func decode(it store.Item) (Message, error) {
	ns, err := it.Int(attrSentAt)
	if err != nil {
		return Message{}, fmt.Errorf("inbox: message %s: %w", it.Key(), err)
	}
	m := Message{
		ID:          it.Str(attrMessageID),
		From:        it.Str(attrFrom),
		To:          it.Str(attrTo),
		Content:     json.RawMessage(it.Str(attrContent)),
		ContentType: it.Str(attrContentType),
		SentAt:      time.Unix(0, ns).UTC(),
	}
	if it.Str(world.AttrType) != TypeMessage || m.ID == "" || it.Key().SK != msgPrefix+m.ID || !json.Valid(m.Content) {
		return Message{}, fmt.Errorf("inbox: item %s is not a well-formed message", it.Key())
	}
	return m, nil
}

// Read returns awnID's messages in world, oldest first: at most o.Limit of
// the visible inbox (the newest MaxMessages unexpired messages) sent after
// o.Since, and no more of them than fit in o.MaxBytes as o.Size measures
// them (by default, as the Lambda proxy response carries them). Unless
// o.Peek it consumes them — exactly those it returns, so what does not fit
// waits for the next Read — exactly once: two concurrent readers never
// both get a message. A consuming Read whose delete Write fails is an error and
// returns nothing; if that Write's outcome is unknown (the connection
// failed in flight), its messages may be gone: exactly once is kept by
// never returning a message that may also have gone to someone else. See
// the package doc for its cost.
func (b *Inbox) Read(ctx context.Context, w, awnID string, o ReadOptions) ([]Message, error) {
	limit := o.Limit
	switch {
	case limit == 0:
		limit = DefaultLimit
	case limit < 0 || limit > MaxLimit:
		return nil, apierror.New(apierror.Invalid, "limit must be between 1 and %d, not %d", MaxLimit, o.Limit)
	}
	if !world.ValidID(w) || !world.ValidAWNID(awnID) {
		return nil, notJoined() // no such id can have joined
	}
	size, budget := o.Size, o.MaxBytes
	if size == nil {
		size = defaultSize
	}
	if budget <= 0 {
		budget = MaxReadBytes
	}
	pk := world.InboxPK(w, awnID)
	for attempt := range maxAttempts {
		if attempt > 0 {
			if err := pause(ctx, time.Duration(rand.Int64N(int64(attempt)*int64(retryPause)))); err != nil {
				return nil, apierror.FromStore("read inbox", err)
			}
		}
		now := b.now()
		visible, boundary, dropped, shards, err := b.window(ctx, w, pk, now)
		if err != nil {
			return nil, err
		}
		picked := make([]Message, 0, limit)
		keys := make([]store.Key, 0, limit)
		used := 0
		for _, h := range visible {
			m := h.Message
			if !o.Since.IsZero() && !m.SentAt.After(o.Since) {
				continue
			}
			n := size(m)
			if len(picked) == limit || len(picked) > 0 && used+n > budget {
				break
			}
			picked = append(picked, m)
			keys = append(keys, h.key)
			used += n
		}
		if o.Peek {
			return picked, nil
		}
		if dropped {
			if err := b.deleteBelow(ctx, pk, shards, boundary); err != nil {
				return nil, err
			}
		}
		if len(picked) == 0 {
			return picked, nil
		}
		// Each by the key it was read from: a message written under a
		// smaller count of shards is not where the count now would put it.
		acts := make([]store.Action, len(keys))
		for i, k := range keys {
			acts[i] = store.Delete(k).When(store.ItemExists())
		}
		_, err = b.store.Write(ctx, acts...)
		switch {
		case err == nil:
			return picked, nil
		case errors.Is(err, store.ErrConditionFailed):
			continue // a concurrent reader took some of them: look again
		default:
			return nil, apierror.FromStore("consume messages", err)
		}
	}
	return nil, &apierror.Error{Kind: apierror.Unavailable, RetryAfter: apierror.StoreRetryAfter,
		Message: "the inbox is being read by concurrent requests; retry"}
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// held is a message of the visible inbox and the key of its item.
type held struct {
	Message
	key store.Key
}

// window returns the visible inbox oldest first, the sort key of its
// oldest message, whether any older unexpired message exists (was
// dropped), and the inbox's count of shards, which the world's event head
// names: it is read beside shard 0, so that an inbox of one shard costs no
// more round trips, and the shards past 0 are read side by side once it is
// in. Each shard is read backward from its newest message down to the
// oldest one that can be unexpired, MaxMessages+1 items at most. Message
// ids are ULIDs, so the newest MaxMessages+1 of the union, in sort-key
// order across the shards, are the inbox's newest, and dropped and the
// boundary mean what they do for one shard.
func (b *Inbox) window(ctx context.Context, w, pk string, now time.Time) ([]held, string, bool, int, error) {
	lo := msgPrefix + world.CursorFloor(now.Add(-TTL))
	var head world.Head
	var herr error
	var wg sync.WaitGroup
	wg.Go(func() { head, herr = b.log.Head(ctx, w) })
	first, err := b.newest(ctx, pk, lo)
	wg.Wait()
	if err != nil {
		return nil, "", false, 0, err
	}
	if herr != nil {
		return nil, "", false, 0, apierror.FromStore("read inbox", herr)
	}
	shards := max(head.Shards, 1)
	items := make([][]store.Item, shards)
	errs := make([]error, shards)
	items[0] = first
	for n := 1; n < shards; n++ {
		wg.Go(func() { items[n], errs[n] = b.newest(ctx, world.ShardPK(pk, n), lo) })
	}
	wg.Wait()
	var all []store.Item
	for n, err := range errs {
		if err != nil {
			return nil, "", false, 0, err
		}
		all = append(all, items[n]...)
	}
	if shards > 1 {
		slices.SortFunc(all, func(x, y store.Item) int { return strings.Compare(y.Key().SK, x.Key().SK) })
	}
	dropped := len(all) > MaxMessages
	if dropped {
		all = all[:MaxMessages]
	}
	msgs := make([]held, 0, len(all))
	boundary := ""
	for _, it := range all {
		m, err := decode(it)
		if err != nil {
			return nil, "", false, 0, apierror.Wrap(apierror.Internal, err, "internal error; try again later")
		}
		boundary = it.Key().SK
		if now.Before(m.SentAt.Add(TTL)) {
			msgs = append(msgs, held{Message: m, key: it.Key()})
		}
	}
	slices.Reverse(msgs)
	return msgs, boundary, dropped, shards, nil
}

// newest reads the partition pk backward from its newest message down to
// the sort key lo, MaxMessages+1 items at most (more pages only past the
// 1 MB cut).
func (b *Inbox) newest(ctx context.Context, pk, lo string) ([]store.Item, error) {
	q := store.Query{PK: pk, SK: store.SKBetween(lo, msgEnd), Backward: true, Limit: MaxMessages + 1}
	var items []store.Item
	for {
		p, err := b.store.Query(ctx, q)
		if err != nil {
			return nil, apierror.FromStore("read inbox", err)
		}
		items = append(items, p.Items...)
		if len(items) > MaxMessages || p.Cursor == "" {
			return items, nil
		}
		q.Cursor, q.Limit = p.Cursor, MaxMessages+1-len(items)
	}
}

// deleteBelow deletes the inbox's messages older than the sort key
// boundary (the oldest visible message) in each of its shards, side by
// side: the dropped ones, and expired ones on the way. Per shard one Query,
// and one Write per MaxMessages items.
func (b *Inbox) deleteBelow(ctx context.Context, pk string, shards int, boundary string) error {
	errs := make([]error, shards)
	var wg sync.WaitGroup
	for n := range shards {
		wg.Go(func() { errs[n] = b.deleteShardBelow(ctx, world.ShardPK(pk, n), boundary) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// deleteShardBelow is deleteBelow in the one partition pk.
func (b *Inbox) deleteShardBelow(ctx context.Context, pk, boundary string) error {
	for {
		// Deleted items leave the range, so every round starts again
		// from its beginning rather than from a cursor.
		p, err := b.store.Query(ctx, store.Query{PK: pk, SK: store.SKLT(boundary), Limit: MaxMessages})
		if err != nil {
			return apierror.FromStore("drop old messages", err)
		}
		acts := make([]store.Action, 0, len(p.Items))
		for _, it := range p.Items {
			acts = append(acts, store.Delete(it.Key()))
		}
		if len(acts) > 0 {
			if _, err := b.store.Write(ctx, acts...); err != nil {
				return apierror.FromStore("drop old messages", err)
			}
		}
		if p.Cursor == "" {
			return nil
		}
	}
}
