package world

import (
	"strings"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
)

// The reads each route's handler makes first, named from its path (and
// body) so that the route can read them ahead of its handler, beside its
// key lookup's read (guard.Ahead, access.Route.ReadAhead): on an instance
// that must read the signing key (a member key it has not seen, a
// world's manifest for its owner's key), the lookup and these reads are
// one round trip, and the handler's transaction the second. Each list is
// exactly what the method named reads (the same keys, the same Query), so
// that its reads find them; a malformed id names none (the method answers
// it without a read). The manifest is not named where the key lookup reads
// it itself (owner routes): what the lookup read is kept for the handler.

// LeaveReads are Leave's reads that do not need the member's awnId (the
// route has only the world in its path): the manifest. The member key item
// the lookup reads gives the rest (LeaveAs).
func LeaveReads(world string) []guard.Read {
	if !worldIDShape.Match(world) {
		return nil
	}
	return []guard.Read{guard.GetRead(ManifestKey(world))}
}

// EventsReads are a poll's first: the event head (PollAs).
func EventsReads(world string) []guard.Read {
	if !worldIDShape.Match(world) {
		return nil
	}
	return []guard.Read{guard.GetRead(EventHeadKey(world))}
}

// ActionReads are SubmitAction's: the manifest (its actions).
func ActionReads(world string) []guard.Read { return LeaveReads(world) }

// KickReads are Kick's besides the manifest: the member and its inbox's
// first page.
func KickReads(world, target string) []guard.Read {
	if !validMember(world, target) {
		return nil
	}
	return []guard.Read{guard.GetRead(MemberKey(world, target)), guard.QueryRead(inboxRead(world, target))}
}

// BanReads are Ban's besides the manifest: the ban, the member and its
// inbox's first page.
func BanReads(world, target string) []guard.Read {
	if !validMember(world, target) {
		return nil
	}
	return append(KickReads(world, target), guard.GetRead(BanKey(world, target)))
}

// UnbanReads are Unban's: the ban.
func UnbanReads(world, target string) []guard.Read {
	if !validMember(world, target) {
		return nil
	}
	return []guard.Read{guard.GetRead(BanKey(world, target))}
}

// PingReads are Ping's: the target and its webhook, twice (Ping's read and
// the probe's).
func PingReads(world, target string) []guard.Read {
	if !validMember(world, target) {
		return nil
	}
	hook := guard.GetRead(WebhookKey(world, target))
	return []guard.Read{guard.GetRead(MemberKey(world, target)), hook, hook}
}

// AgentWorldsReads are AgentWorlds' first: the page of the agent's index.
func AgentWorldsReads(awnID string, limit int, cursor string) []guard.Read {
	q, err := agentWorldsQuery(awnID, limit, cursor)
	if err != nil {
		return nil
	}
	return []guard.Read{guard.QueryRead(q)}
}

// agentWorldsQuery is the Query of a page of awnID's view.
func agentWorldsQuery(awnID string, limit int, cursor string) (store.Query, error) {
	switch {
	case limit == 0:
		limit = DefaultListLimit
	case limit < 0 || limit > MaxListLimit:
		return store.Query{}, invalid("limit must be between 1 and %d, not %d", MaxListLimit, limit)
	}
	if !ValidAWNID(awnID) {
		return store.Query{}, invalid("awnId must be aw:sha256: and 64 lowercase hex digits; got %s", apierror.Quote(awnID))
	}
	q := store.Query{PK: AgentPK(awnID), Limit: limit + 1}
	if cursor != "" {
		w, ok := strings.CutPrefix(cursor, joinedPrefix)
		if !ok {
			w, ok = strings.CutPrefix(cursor, ownsPrefix)
		}
		if !ok || !worldIDShape.Match(w) {
			return store.Query{}, invalid("cursor must be the cursor a previous page returned; got %s", apierror.Quote(cursor))
		}
		q.SK = store.SKGE(cursor + "\x00")
	}
	return q, nil
}

// inboxRead is the Query of the first page of awnID's inbox a removal
// reads (readForRemoval): of its shard 0, the whole inbox unless the world
// has several event shards, whose others the removal clears after its
// commit (clearOtherShards), having learnt their count from it.
func inboxRead(world, awnID string) store.Query {
	return store.Query{PK: InboxPK(world, awnID), Limit: removeInbox}
}
