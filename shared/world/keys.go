// Package world is the AWN world layer (docs/worlds.md) written once over the
// item API (store.Store), so it runs on memory, bolt and DynamoDB alike:
// worlds and their manifests, membership with slots, the key lookups of
// member routes, the event log with its visibility rules and long poll,
// actions, and poll-based reachability. Direct messages live in package
// inbox and per-agent rate limits in package ratelimit; both write the
// items and events this package defines.
//
// # Items
//
//	item             pk                     sk                 type
//	manifest         WORLD#<world>          MANIFEST           world
//	listing          WORLD#<world>          LIST#<sort>#<scope> worldlist (in gsi1: discovery.go)
//	member           WORLD#<world>          MEMBER#<awnId>     member
//	member key       WORLD#<world>          MKEY#<keyid>       memberkey
//	roster           WORLD#<world>          ROSTER#<awnId>     roster    (purge.go)
//	presence due     WORLD#<world>          PRESENCE#<awnId>   presencedue (in gsi1: presence_sweep.go)
//	webhook          WORLD#<world>          WEBHOOK#<awnId>    webhook   (package webhook)
//	shared event     EVENTS#<world>         <eventId>          event
//	  (sharded)      EVENTS#<world>#s<n>    <eventId>          event     (n in 1..shards-1)
//	private event    EVENTS#<world>#<awnId> <eventId>          event
//	  (sharded)      EVENTS#<world>#<awnId>#s<n> <eventId>     event     (n in 1..shards-1)
//	event head       EVENTHEAD#<world>      HEAD               eventhead
//	deletion marker  WORLDDEL#<world>       MARKER             worlddeletion (lifecycle.go)
//	action marker    ACTIONDONE#<world>#<actionId> DONE     actionmarker (queued.go)
//	message          INBOX#<world>#<awnId>  MSG#<messageId>    message   (package inbox)
//	  (sharded)      INBOX#<world>#<awnId>#s<n> MSG#<messageId> message  (n in 1..shards-1)
//
// The manifest holds the owner's key, the slot counter and the member
// count. A member item holds what the agents list shows (slot, joinedAt,
// metadata, subjectId) and lastPollAt; the member key item lets a member
// route find the signing key of a keyid within one world with one Get, and
// carries the membership's joinedAt (from the join's transaction on), so a
// leave on an instance that read it need not read the member (LeaveAs), and
// the presence last announced (every announcement writes it beside the
// member's), so a poll on such an instance knows whether it brings the
// member online (markPolledOffline).
// Public and agents-visible events share one partition per world, private
// events have one per recipient, so a poll is one Query of each; event ids
// are ULIDs, so sort-key order is time order and an id is a cursor. The
// event head holds last, the highest event id committed in the world, and
// shards: a world whose owner set eventShards writes its shared events
// across that many partitions (one partition takes about 500 events a
// second in transactions), each event in the shard its id hashes to, and
// a poll Queries every shard the head names. A recipient's partitions are
// spread over the same count, so that a flood of messages to one member
// is no hot partition either: its private events (EventKeyIn) and its
// inbox (a message is the attachment of its message.received, placed in
// the shard of the event's id, AttachmentKey), each shard n past 0 its
// shard-0 partition with "#s<n>" (ShardPK; an awnId starts with
// "aw:sha256:", so no recipient's partition is another's shard). A poll
// Queries the shards of both kinds; a reader or remover of an inbox
// learns the count from the head and takes every shard.
// The count only grows and shard 0 is the unsharded partition, so every
// event up to the head (and every message) is in a shard the head names;
// a writer that knew another count fails the head's condition (it carries
// the count) and learns it from the head returned. The world's deletion marks the head
// deleted in its transaction, and every commit's update of the head is
// conditioned on that mark's absence: no event commits to a deleted world,
// and a commit need not check the manifest besides.
//
// # Event order
//
// A reader that follows `after` must see every event it may see exactly
// once, in id order, whatever the writers' number and clocks. Ids come from
// clocks, and an id allocated before a commit can become visible after a
// later id has (a slow write, a lagging clock): a cursor past it skips it.
// So every event commits through Log.Commit, in one transaction with an
// update of its world's head conditioned on last < the event's id (a batch
// of events: on last < its first id, setting its last). A writer finding
// the head at or past its id allocates an id past the head and commits
// again. Commit order is then id order, across the shared partition and
// every private one; a lagging instance learns how far ahead the head runs
// and allocates its ids that far ahead, so it does not lose every round.
// A reader Gets the head (strongly consistent): every event up to it has
// committed and no event below it can commit any more. It then Queries
// the partitions (the shards of the shared and of its private ones) for ids in (after,
// head], and when a page of any was cut (limit, or the 1 MB cut: it
// carries a cursor) answers only up to the lowest such page's last id. An `after` past the head, or more than MaxClockSkew
// ahead of the clock, is Invalid: no such cursor was handed out.
//
// Alternatives considered: sequence numbers assigned from the table's
// stream order only events of one partition key (a world's events span
// several) and add a consumer between a write and its visibility; a read
// horizon behind the writers' clocks skips whatever commits later than the
// horizon (a stalled writer), so it is likely but not exact. The head is
// exact and needs no process of its own.
//
// Cost per event: the head's Update joins the event's transaction — in AWS
// on-demand, 2 more write units (a transactional write of a small item),
// so an Append is 4 write units where a lone PutItem was 1. Reads per
// poll: 1 GetItem of the head (1 read unit) with, on its first check, 1
// GetItem of the poller's member item beside it (which tells the poll's
// record whether it changes presence), and the 2 Queries (2 per event
// shard in a sharded world: the shared and the private shards) only when
// the head is past `after`; a waiting long poll's later checks are 1 GetItem
// each. Ceiling per world: one hot item, on which transactions serialize.
// DynamoDB allows one partition key about 1,000 write units a second and
// each commit spends 2 on the head, so at most ~500 commits a second per
// world; concurrent writers' transactions on the head conflict
// (TransactionCanceled with TransactionConflict, which the dynamo engine
// retries with backoff and then reports as Unavailable), which lowers that
// further as writers multiply. Commits waiting in one process share a
// transaction (Log's group commit), so a batch is one commit against the
// ceiling; a Lambda instance has one request at a time and does not batch.
// DynamoDB Local's transactions are far slower than DynamoDB's, so the
// soak's figure (TestEventLogSoak, in the README) is no estimate of AWS.
//
// # Writes and races
//
// Service writes every event in the same store.Write as the change it
// reports. The slot counter changes only by a single-item UpdateItem ADD
// outside any transaction, returning the slot. The member count changes in
// the join's and the leave's own transactions: a join writes member,
// member key, roster, agent.joined and ADD members 1 on the manifest,
// conditioned on the member being absent and on the world being open and
// under the cap (maxMembers) it read with the slot, so neither a close nor
// a full world can be passed by a racing join, and the count is exact
// whatever fails. Of racing joins of one key the losers return the
// winner's membership (slots lost that way are never used). A leave
// deletes member, member key and webhook, writes agent.left and ADD
// members -1 in one transaction conditioned on the membership it read; it
// then clears the inbox page by page. Holding the manifest in these
// transactions makes concurrent joins of one world conflict on it as they
// already do on the event head (the engine retries a conflict with
// backoff).
//
// Every write only a member may make carries the membership as a condition
// of its own transaction (MemberCheck: a ConditionCheck that the member
// item exists): an action's event, a message (its sender), a webhook. The
// leave's transaction deletes the member item, so of a leave and such a
// write the store orders one first and the other sees it: nothing a member
// writes while leaving outlives the membership. Holding the member item in
// the transaction costs 2 more write units (a transactional item), and a
// concurrent single-item write of the same member item (a poll recording
// lastPollAt) can cancel it; the engine retries that conflict.
//
// A write the store answers with store.ErrOutcomeUnknown (a lost answer,
// bolt's fsync failing after the commit) is neither success nor failure:
// Log.Commit settles it — it moves the head to the event's id unless the
// head is there already (after that the write in doubt can never commit),
// then reads the event back — and writes again when it was not applied.
// A join or leave whose outcome stays unknown changes nothing more.
//
// # Presence
//
// One rule (presence.go): a member is online while it holds a stream
// open, polled within ReachableWithin, or its webhook answered last;
// registryOffline overrides it. Every change is announced once by
// presence.changed, committed with the write that makes it, conditioned
// on the presence it replaces. A lapse no write makes (a poll or stream
// that stops) is announced by SweepPresence (presence_sweep.go, function
// presence-sweep, every minute) from a due item per online member in gsi1
// (PRESDUE#<0..3>, by due time), never a scan. Costs: an announcement
// online or offline is one commit of the event with the member update
// and the due item's Put or Delete (one more transactional item, 2 write
// units); a sweep run with nothing due is 4 Queries; per online member
// and minute 1 GetItem and 1 UpdateItem (3 write units with its index
// entry); per lapse 2 GetItems and the event's commit.
//
// # Errors
//
// Every error is an *apierror.Error: bad input → Invalid naming the field;
// unknown world or member → NotFound; a caller that is not a member →
// NotJoined; another key changing a world → Forbidden; a busy store or an
// expired context → Unavailable (apierror.FromStore); anything else →
// Internal, its text kept for logs only. Malformed ids (world, awnId,
// keyid) are answered as absent without a store call.
package world

import (
	"strconv"
	"strings"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/store"
)

// Type attributes of the items this package owns, so a change-feed
// consumer (the webhook dispatcher) tells items apart without parsing keys.
const (
	TypeWorld     = "world"
	TypeMember    = "member"
	TypeMemberKey = "memberkey"
	TypeEvent     = "event"
)

// AttrType is the attribute every item of the table carries its type in.
const AttrType = "type"

const (
	worldPrefix   = "WORLD#"
	manifestSK    = "MANIFEST"
	memberPrefix  = "MEMBER#"
	mkeyPrefix    = "MKEY#"
	webhookPrefix = "WEBHOOK#"
	eventsPrefix  = "EVENTS#"
)

// WorldPK is the partition of a world's manifest, members, member keys and
// webhooks.
func WorldPK(world string) string { return worldPrefix + world }

// ManifestKey is the key of a world's manifest.
func ManifestKey(world string) store.Key { return store.Key{PK: WorldPK(world), SK: manifestSK} }

// MemberKey is the key of awnID's membership of world.
func MemberKey(world, awnID string) store.Key {
	return store.Key{PK: WorldPK(world), SK: memberPrefix + awnID}
}

// MemberPrefix is the sort-key prefix of a world's member items.
const MemberPrefix = memberPrefix

// MemberKeyKey is the key of the item binding keyID to a member of world.
func MemberKeyKey(world, keyID string) store.Key {
	return store.Key{PK: WorldPK(world), SK: mkeyPrefix + keyID}
}

// WebhookKey is the key of awnID's webhook in world (package webhook owns
// the item; leaving deletes it).
func WebhookKey(world, awnID string) store.Key {
	return store.Key{PK: WorldPK(world), SK: webhookPrefix + awnID}
}

// WebhookPrefix is the sort-key prefix of a world's webhook items.
const WebhookPrefix = webhookPrefix

// WebhookStatsKey is the key of the delivery counters of awnID's webhook in
// world (package webhook owns the item): a partition of their own, so the
// deliveries of a fan-out to many webhooks write as many partitions, not
// the world's.
func WebhookStatsKey(world, awnID string) store.Key {
	return store.Key{PK: "WHSTATS#" + world + "#" + awnID, SK: "STATS"}
}

// SharedEventsPK is the partition of a world's public and agents-visible
// events.
func SharedEventsPK(world string) string { return eventsPrefix + world }

// MaxEventShards is the most partitions a world's shared events may be
// written across (Manifest.EventShards).
const MaxEventShards = 16

// EventShardPK is shard n of a world's shared events: shard 0 is
// SharedEventsPK, so a world that was never sharded, and every event a
// world committed before it was, is in shard 0. ("#s" cannot begin an
// awnId, so a shard is never a recipient's private partition.)
func EventShardPK(world string, n int) string { return ShardPK(SharedEventsPK(world), n) }

// ShardPK is shard n of the partition pk: pk itself for shard 0, so a
// partition that was never sharded is shard 0 of every count.
func ShardPK(pk string, n int) string {
	if n == 0 {
		return pk
	}
	return pk + "#s" + strconv.Itoa(n)
}

// PrivateEventsPK is the partition of the private events of one
// recipient: shard 0 of them, ShardPK naming the others in a sharded world.
func PrivateEventsPK(world, awnID string) string { return eventsPrefix + world + "#" + awnID }

// InboxPK is the partition of the direct messages waiting for awnID in
// world (package inbox owns its items; leaving clears it): shard 0 of
// them, ShardPK naming the others in a sharded world.
func InboxPK(world, awnID string) string { return "INBOX#" + world + "#" + awnID }

// ValidID reports whether world is a well-formed world id. Domains that key
// items by world ids (inbox, ratelimit) answer a malformed one without a
// store call, so it never reaches the store as an oversized key.
func ValidID(world string) bool { return worldIDShape.Match(world) }

// ValidAWNID reports whether awnID is a well-formed awnId (aw:sha256: and
// 64 lowercase hex digits); no other id can have joined a world.
func ValidAWNID(awnID string) bool {
	hex, ok := strings.CutPrefix(awnID, auth.AWNIDPrefix)
	return ok && awnIDHex.Match(hex)
}
