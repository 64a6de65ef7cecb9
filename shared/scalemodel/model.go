// Package scalemodel is the scale model of docs/scale.md written as code:
// the write units each hot operation spends on each partition key, so the
// document's figures and the simulation that checks them
// (TestSimulationMatchesModel, on DynamoDB Local) read the same numbers.
//
// Units follow DynamoDB on-demand billing for items under 1 KB: a lone
// PutItem, UpdateItem or DeleteItem is 1 write unit on its key; every
// action of a TransactWriteItems, a ConditionCheck included, is 2. A key is
// a partition key of the table (or of gsi1, prefixed "gsi1:"), with the
// variable parts named (<world>, <to>, <awnId>, <n> for a write shard), as
// docs/storage.md names them. A key pattern whose operations spread over
// many partitions (a shard each, a webhook each) has a Spread: its load
// per partition is its units times the rate over the spread.
package scalemodel

import "sort"

// PartitionWriteUnits is DynamoDB's write throughput per partition, and
// so the most one partition key can take while its items share one
// partition (a single item never splits).
const PartitionWriteUnits = 1000

// Workload is one operation at a rate, and what it writes.
type Workload struct {
	Name string
	// Rate is operations per second.
	Rate float64
	// Units is write units per operation on each key.
	Units map[string]float64
	// Spread is, for a key pattern of Units, how many partitions its
	// operations spread over evenly (write shards, one key per webhook);
	// absent means 1.
	Spread map[string]float64
}

// KeyLoad is the write units per second a workload puts on one key (on
// each of its partitions, for a key with a Spread).
type KeyLoad struct {
	Key   string
	Units float64
	// Over is Units ÷ PartitionWriteUnits: above 1 the key throttles.
	Over float64
}

// Loads returns w's load on every key, hottest first (ties by key).
func (w Workload) Loads() []KeyLoad {
	var ls []KeyLoad
	for k, u := range w.Units {
		per := u * w.Rate / max(1, w.Spread[k])
		ls = append(ls, KeyLoad{Key: k, Units: per, Over: per / PartitionWriteUnits})
	}
	sort.Slice(ls, func(i, j int) bool {
		if ls[i].Units != ls[j].Units {
			return ls[i].Units > ls[j].Units
		}
		return ls[i].Key < ls[j].Key
	})
	return ls
}

// The workloads of docs/scale.md, each a function so no caller can change
// the model under another. The request's nonce (NONCE#<keyid>, 1 unit) is
// left out: it spreads over the senders' keys, as its rate-limit count
// (RATE#<world>#<awnId>) does over the senders, which the model names.

// ActingMembers is how many members a world at 5,000 actions a second
// has at the least: each may submit 60 a minute (the default rate limit,
// shared/ratelimit), one a second.
const ActingMembers = 5000

// Senders is how many senders an inbox at 1,000 messages a second has at
// the least: each may send 30 a minute (the default rate limit).
const Senders = 2000

// WorldEvents is one world taking 5,000 submitted actions a second
// (POST …/actions) from members whose keys the instance verified before:
// the request's guard goes beside the action's read of the manifest (its
// nonce and its rate-limit count on the member's RATE#<world>#<awnId> as
// lone writes, 1 unit each; its checks of the member key and the manifest
// as reads), then one transaction of the
// member's check, the event and the world's event head (shared/world,
// Log.Commit). The member's check is on its entry in the agent's index of
// worlds (world.MemberCheck), in the member's own partition AWN#<awnId>:
// 5,000 members, one action a second each. The world's partition takes
// none of it (0, which the simulation holds it to). (A key's first
// request on an instance carries its guard in that transaction instead,
// the manifest's check with it: 2 units on WORLD#<world>, once per key
// and instance.)
func WorldEvents() Workload {
	return Workload{Name: "world at 5,000 events/s", Rate: 5000,
		Units: map[string]float64{
			"WORLD#<world>":        0,
			"AWN#<awnId>":          2,
			"RATE#<world>#<awnId>": 1,
			"EVENTS#<world>":       2,
			"EVENTHEAD#<world>":    2,
		},
		Spread: map[string]float64{"AWN#<awnId>": ActingMembers, "RATE#<world>#<awnId>": ActingMembers},
	}
}

// EventShards is the shards of the sharded world's events (world's
// MaxEventShards; a test keeps the two equal).
const EventShards = 16

// ShardedWorldEvents is WorldEvents in a world whose owner set eventShards
// to 16: each event is written to the shard its id hashes to
// (EVENTS#<world> is shard 0, EVENTS#<world>#s1 … #s15 the others, one
// pattern here), so the events' partition load is spread 16 ways. The
// members' checks and the event head are as they were.
func ShardedWorldEvents() Workload {
	w := WorldEvents()
	w.Name = "world of 16 event shards at 5,000 events/s"
	w.Units["EVENTS#<world>#s<n>"] = w.Units["EVENTS#<world>"]
	delete(w.Units, "EVENTS#<world>")
	w.Spread["EVENTS#<world>#s<n>"] = EventShards
	return w
}

// ActionsPerCommit is how many queued actions of distinct members commit
// in one transaction (shared/world, CommitQueued): DynamoDB's 100 actions,
// less the head's update, at 3 an action (its event, its marker, its
// member's check).
const ActionsPerCommit = (100 - 1) / 3

// BatchedWorldEvents is ShardedWorldEvents in a world that also batches its
// actions (batchActions): a request settles its guard alone (its nonce and
// its rate-limit count as lone writes, its checks as reads) and queues the
// action; the committer commits ActionsPerCommit actions of distinct
// members to a transaction: one update of the head for them all, and per
// action its event's Put (in its shard), its marker's Put (a key of its
// own, ACTIONDONE#<world>#<actionId>) and its member's check (in its own
// partition). 5,000 members acting once a second each are distinct within
// a batch; a member acting twice in one is checked once.
func BatchedWorldEvents() Workload {
	w := ShardedWorldEvents()
	w.Name = "world of 16 event shards batching 5,000 actions/s"
	w.Units["EVENTHEAD#<world>"] = 2.0 / ActionsPerCommit
	w.Units["ACTIONDONE#<world>#<actionId>"] = 2
	w.Spread["ACTIONDONE#<world>#<actionId>"] = w.Rate
	return w
}

// InboxMessages is one recipient getting 1,000 messages a second from
// many senders (POST …/messages): each send is one transaction of the
// request's guard (its nonce, left out here, and its rate-limit count on
// the sender's RATE#<world>#<from>), the recipient's and the sender's
// checks (world.MemberCheck, each in its own agent's partition), the
// message, its private message.received event and the world's event head
// (shared/inbox, Send). The guard's checks are not carried: the sender's
// check, on its member key's twin, holds the membership, and the head's
// update, conditioned on the world not being deleted, holds the world's
// existence (guard.Part.HeldBy). So the world's partition takes nothing;
// the recipient's own partition one check; the senders' theirs, 2,000
// senders at one message every 2 s each.
func InboxMessages() Workload {
	return Workload{Name: "inbox at 1,000 messages/s", Rate: 1000,
		Units: map[string]float64{
			"WORLD#<world>":       0,
			"AWN#<to>":            2,
			"AWN#<from>":          2,
			"RATE#<world>#<from>": 2,
			"INBOX#<world>#<to>":  2,
			"EVENTS#<world>#<to>": 2,
			"EVENTHEAD#<world>":   2,
		},
		Spread: map[string]float64{"AWN#<from>": Senders, "RATE#<world>#<from>": Senders},
	}
}

// InboxShards is the event shards of the world of BatchedInboxMessages:
// a recipient's inbox and private events are written across the world's
// count, and 8 takes the inbox's 4,000 units a second (its messages put
// and consumed) at half a partition each.
const InboxShards = 8

// MessagesPerCommit is how many queued messages of distinct senders to
// one recipient commit in one transaction (shared/world, CommitQueued):
// DynamoDB's 100 actions, less the head's update and the recipient's
// check (one for them all), at 4 a message (its event, the message item
// attached to it, its marker, its sender's check).
const MessagesPerCommit = (100 - 2) / 4

// BatchedInboxMessages is InboxMessages in a world that batches its
// messages (batchMessages) and writes its events across InboxShards
// partitions, its recipient consuming what arrives: a request settles its
// guard alone (its nonce and its rate-limit count as lone writes) and
// queues the message; the committer commits MessagesPerCommit messages to
// a transaction: one update of the head and one check of the recipient
// for them all, and per message its message.received and the message
// itself, both in the recipient's shard the event's id hashes to
// (INBOX#<world>#<to> and EVENTS#<world>#<to> are shard 0, #s1 … #s7 the
// others), its marker (a key of its own) and its sender's check. The
// recipient's consuming reads delete the messages, up to 100 in one
// transaction: 2 more units a message on its inbox shard. (The 100-message
// cap drops what is not read in time, and a drop is a delete too, so the
// inbox's 4 units a message stand either way.)
func BatchedInboxMessages() Workload {
	return Workload{Name: "inbox at 1,000 messages/s, batched, 8 event shards, consumed", Rate: 1000,
		Units: map[string]float64{
			"WORLD#<world>":                  0,
			"AWN#<to>":                       2.0 / MessagesPerCommit,
			"AWN#<from>":                     2,
			"RATE#<world>#<from>":            1,
			"INBOX#<world>#<to>#s<n>":        4,
			"EVENTS#<world>#<to>#s<n>":       2,
			"EVENTHEAD#<world>":              2.0 / MessagesPerCommit,
			"ACTIONDONE#<world>#<messageId>": 2,
		},
		Spread: map[string]float64{
			"AWN#<from>": Senders, "RATE#<world>#<from>": Senders,
			"INBOX#<world>#<to>#s<n>": InboxShards, "EVENTS#<world>#<to>#s<n>": InboxShards,
			"ACTIONDONE#<world>#<messageId>": 1000,
		},
	}
}

// FanOut is one public event delivered to 10,000 webhooks, taken at
// the rate the deliverer reaches (row 9 measured about 1,000 a second
// on 2 cores; in AWS up to 100 invocations × 10 deliveries at once):
// each delivery updates its webhook's counters, an UpdateItem on the
// webhook's own counters key, so the 10,000 deliveries spread over 10,000
// partitions; the event itself is written once. The world's partition
// (the webhook item) is written only by an outcome that changes whether
// the webhook answered, not in the steady state modelled here (a webhook
// answering its first delivery is one such write, once).
func FanOut() Workload {
	return Workload{Name: "one public event to 10,000 webhooks, 1,000 deliveries/s", Rate: 1000,
		Units:  map[string]float64{"WHSTATS#<world>#<awnId>": 1},
		Spread: map[string]float64{"WHSTATS#<world>#<awnId>": 10000},
	}
}

// ListingShards is the write shards of each world listing (world's
// ListingShards; a test keeps the two equal).
const ListingShards = 4

// RegistryJoins is a 100,000-world registry in which each world sees
// a join or a leave every 100 s (1,000 a second in all): each changes
// the world's member count on its listing items, and the
// members-ordered listing's gsi1 sort key with it (a delete and a put
// in the index), in gsi1 partitions every world shares — written across
// ListingShards partitions each, by a hash of the world id.
func RegistryJoins() Workload {
	return Workload{Name: "100,000 worlds, a join or leave per world every 100 s", Rate: 1000,
		Units: map[string]float64{
			"gsi1:WORLDS#mem#*#<n>": 2,
			"gsi1:WORLDS#new#*#<n>": 1,
		},
		Spread: map[string]float64{
			"gsi1:WORLDS#mem#*#<n>": ListingShards,
			"gsi1:WORLDS#new#*#<n>": ListingShards,
		},
	}
}
