package world

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/store"
)

// Presence: one rule, wherever presence shows (the agents list, ping, the
// agent's own view, presence.changed). A member is online while
//
//   - it holds an event stream open (the member item's streamUntil, a lease
//     the stream refreshes, is in the future),
//   - it polled events within ReachableWithin (lastPollAt), or
//   - its webhook answered the last delivery or probe sent to it (the
//     latest of the webhook item's lastSuccessAt / lastErrorAt and the
//     member item's probeOkAt / probeFailAt is a success, and the webhook
//     is enabled; package webhook writes those two on the webhook item
//     only for an outcome that changes this answer, which then decides as
//     the latest outcomes would, and every outcome on its counters item),
//
// unless its registration is offline (PUT /api/v1/agents/{name}/presence):
// registryOffline on the member item, kept by SetRegistryPresence in every
// world the agent joined, overrides all three.
//
// # presence.changed
//
// The member item holds presence, the presence last announced in the
// world (absent: offline, as a new member is). A change is announced by the
// write that makes it: a poll after a silence (MarkPolled: its update is
// conditioned on the member being announced online and polled recently,
// so a steady poller pays nothing more; the condition failing is the
// signal), a registry presence change (SetRegistryPresence), a ping's
// probe of a webhook (RecordProbe), a delivery's outcome (SettlePresence).
// Each commits presence.changed with an update of presence conditioned on
// the value it read, so of racing writers one announces a change.
//
// Going stale is a change no write makes: 30 s without a poll pass
// silently. The lists and ping compute presence from the rule, so they
// show it at once; the announcement comes from the presence sweep
// (presence_sweep.go), a scheduled function that reads, per run, only the
// members whose presence may have lapsed by then (a due item per member
// announced online, in gsi1 by due time), and announces offline within a
// run's period (one minute) of the lapse — or from the member's next poll
// if that comes first (data.since: when its last poll went stale), with
// the online that poll brings in the one transaction (pollAfterSilence).

// Attributes of presence on the member item.
const (
	attrPresence        = "presence"
	attrRegistryOffline = "registryOffline"
	attrStreamUntil     = "streamUntil"
	attrProbeOKAt       = "probeOkAt"
	attrProbeFailAt     = "probeFailAt"
)

// Attributes of the webhook item (package webhook writes them) that the
// presence rule reads; the counters and latest outcomes by the same names
// are on the webhook's counters item (WebhookStatsKey), which the agent's
// view reads.
const (
	hookAttrEnabled       = "enabled"
	hookAttrLastSuccessAt = "lastSuccessAt"
	hookAttrLastErrorAt   = "lastErrorAt"
	hookAttrURL           = "url"
	hookAttrLastError     = "lastError"
	hookAttrDelivered     = "delivered"
	hookAttrFailed        = "failed"
)

// Hook is what the presence rule and the agent's view read of a member's
// webhook: whether one is set, and how it answered.
type Hook struct {
	Set       bool
	URL       string
	Enabled   bool
	Delivered int64
	Failed    int64
	LastError string
	// LastSuccessAt and LastErrorAt are the latest delivery outcomes.
	LastSuccessAt, LastErrorAt time.Time
}

func decodeHook(it store.Item) Hook {
	if it == nil {
		return Hook{}
	}
	return Hook{
		Set: true, URL: it.Str(hookAttrURL), Enabled: it.BoolAttr(hookAttrEnabled),
		Delivered: intAttr(it, hookAttrDelivered), Failed: intAttr(it, hookAttrFailed),
		LastError:     it.Str(hookAttrLastError),
		LastSuccessAt: timeAttr(it, hookAttrLastSuccessAt), LastErrorAt: timeAttr(it, hookAttrLastErrorAt),
	}
}

func intAttr(it store.Item, name string) int64 {
	n, err := it.Int(name)
	if err != nil {
		return 0
	}
	return n
}

func timeAttr(it store.Item, name string) time.Time {
	n := intAttr(it, name)
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// Answered reports whether the member's webhook answered the last delivery
// or probe sent to it (m carries the probes' outcomes).
func Answered(m Member, h Hook) bool {
	if !h.Set || !h.Enabled {
		return false
	}
	ok := later(h.LastSuccessAt, m.ProbeOKAt)
	fail := later(h.LastErrorAt, m.ProbeFailAt)
	return !ok.IsZero() && !ok.Before(fail)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// PresenceOf is the presence rule: m's presence at now with its webhook h.
func PresenceOf(m Member, h Hook, now time.Time) string {
	if m.RegistryOffline {
		return PresenceOffline
	}
	if now.Before(m.StreamUntil) || polledWithin(m, now) || Answered(m, h) {
		return PresenceOnline
	}
	return PresenceOffline
}

// presenceData is the payload of presence.changed.
type presenceData struct {
	AWNID    string `json:"awnId"`
	Presence string `json:"presence"`
	// Since is when the change happened when that was before its
	// announcement (a poll that went stale); absent otherwise.
	Since string `json:"since,omitempty"`
}

// announce commits presence.changed to presence for m, with an update of
// the member item's presence conditioned on the value m holds (and its
// membership), plus set. It reports whether it announced: false when a
// racing writer changed presence first (or the member left).
func (s *Service) announce(ctx context.Context, m Member, presence string, since time.Time, set func(store.Action) store.Action) (bool, error) {
	return s.announceWith(ctx, m, presence, since, nil, set)
}

// announceWith is announce with a further condition on the member item
// and further actions in the same transaction (the sweep's: the rule's
// inputs as it read them). The same transaction schedules the presence
// sweep's look at an online member (its due item, ReachableWithin on) or
// deletes that item when it goes offline.
func (s *Service) announceWith(ctx context.Context, m Member, presence string, since time.Time, also store.Cond, set func(store.Action) store.Action, extra ...store.Action) (bool, error) {
	now := s.now().UTC()
	d := presenceData{AWNID: m.AWNID, Presence: presence}
	if !since.IsZero() && since.Before(now) {
		d.Since = since.UTC().Format(time.RFC3339Nano)
	}
	ev, err := s.ids.NewEvent(m.World, PresenceChanged, Agents, "", d, now)
	if err != nil {
		return false, internal(err)
	}
	cond := store.Eq(attrJoinedAt, store.N(m.JoinedAt.UnixNano()))
	if m.Announced == PresenceOnline {
		cond = store.And(cond, store.Eq(attrPresence, store.S(PresenceOnline)))
	} else {
		cond = store.And(cond, store.Or(store.NotExists(attrPresence), store.Eq(attrPresence, store.S(PresenceOffline))))
	}
	if also != nil {
		cond = store.And(cond, also)
	}
	up := store.Update(MemberKey(m.World, m.AWNID)).SetAttr(attrPresence, store.S(presence)).When(cond)
	if set != nil {
		up = set(up)
	}
	acts := append([]store.Action{up}, extra...)
	if m.KeyID != "" {
		// The member key item carries the presence announced, for the
		// poll whose key lookup reads it (markPolledOffline). It exists
		// while the member does (a join writes both, a removal deletes
		// both), so the condition holds whenever the member's does.
		acts = append(acts, store.Update(MemberKeyKey(m.World, m.KeyID)).SetAttr(attrPresence, store.S(presence)).When(store.ItemExists()))
	}
	if presence == PresenceOnline {
		acts = append(acts, duePut(m, now.Add(ReachableWithin+time.Millisecond)))
	} else {
		acts = append(acts, store.Delete(PresenceDueKey(m.World, m.AWNID)))
	}
	_, err = s.log.Commit(ctx, ev, acts...)
	if errors.Is(err, store.ErrConditionFailed) {
		return false, nil
	}
	if err != nil {
		return false, apierror.FromStore("announce presence", err)
	}
	return true, nil
}

// readHook reads awnID's webhook item in world (absent: Hook{}).
func (s *Service) readHook(ctx context.Context, world, awnID string) (Hook, error) {
	it, err := s.store.Get(ctx, WebhookKey(world, awnID))
	if errors.Is(err, store.ErrNotFound) {
		return Hook{}, nil
	}
	if err != nil {
		return Hook{}, err
	}
	return decodeHook(it), nil
}

// readHookStats fills h's counters and latest outcomes from the webhook's
// counters item (WebhookStatsKey; absent: none yet). The webhook item
// keeps only the outcomes that changed whether it answered, which decide
// presence as the latest would (package webhook's doc); the view shows the
// latest.
func (s *Service) readHookStats(ctx context.Context, world, awnID string, h Hook) (Hook, error) {
	it, err := s.store.Get(ctx, WebhookStatsKey(world, awnID))
	if errors.Is(err, store.ErrNotFound) {
		it = store.Item{}
	} else if err != nil {
		return Hook{}, err
	}
	h.Delivered, h.Failed, h.LastError = intAttr(it, hookAttrDelivered), intAttr(it, hookAttrFailed), it.Str(hookAttrLastError)
	h.LastSuccessAt, h.LastErrorAt = timeAttr(it, hookAttrLastSuccessAt), timeAttr(it, hookAttrLastErrorAt)
	return h, nil
}

// settle announces m's presence at now when it differs from the one
// announced, reading its webhook; a racing announcement wins quietly.
func (s *Service) settle(ctx context.Context, m Member) error {
	h, err := s.readHook(ctx, m.World, m.AWNID)
	if err != nil {
		return apierror.FromStore("read webhook", err)
	}
	return s.settleWith(ctx, m, h)
}

// settleWith is settle with m's webhook h already read.
func (s *Service) settleWith(ctx context.Context, m Member, h Hook) error {
	p := PresenceOf(m, h, s.now())
	if p == m.announced() {
		return nil
	}
	var since time.Time
	if p == PresenceOffline && !m.LastPollAt.IsZero() {
		since = m.LastPollAt.Add(ReachableWithin)
	}
	_, err := s.announce(ctx, m, p, since, nil)
	return err
}

func (m Member) announced() string {
	if m.Announced == PresenceOnline {
		return PresenceOnline
	}
	return PresenceOffline
}

// SettlePresence announces awnID's presence in world when it changed since
// it was last announced (presence.changed): what a ping of it does, and
// what a writer of the rule's inputs outside this package (the event
// stream, webhook delivery) calls after its write. Not a member →
// NotFound. Cost: 2 GetItems (member, webhook), plus one commit when the
// presence changed.
func (s *Service) SettlePresence(ctx context.Context, world, awnID string) error {
	m, err := s.Member(ctx, world, awnID)
	if err != nil {
		return err
	}
	return s.settle(ctx, m)
}

// RecordProbe keeps the outcome of a live probe of target's webhook (ping)
// on its member item, so that presence counts it as an answer (or its
// absence), and announces a change of presence. Not a member → NotFound.
// Cost: 1 UpdateItem returning the member, 1 GetItem (its webhook), plus
// one commit when the presence changed.
func (s *Service) RecordProbe(ctx context.Context, world, target string, answered bool) error {
	if !validMember(world, target) {
		return memberNotFound(world, target)
	}
	attr := attrProbeFailAt
	if answered {
		attr = attrProbeOKAt
	}
	res, err := s.store.Write(ctx, store.Update(MemberKey(world, target)).
		SetAttr(attr, store.N(s.now().UTC().UnixNano())).When(store.ItemExists()).Returning())
	if errors.Is(err, store.ErrConditionFailed) {
		return memberNotFound(world, target)
	}
	if err != nil {
		return apierror.FromStore("record probe", err)
	}
	m, err := decodeMember(world, res[0])
	if err != nil {
		return internal(err)
	}
	return s.settle(ctx, m)
}

// PresenceIn returns target's presence in world by the rule (2 GetItems:
// member and webhook). Not a member → NotFound.
func (s *Service) PresenceIn(ctx context.Context, world, target string) (Member, string, error) {
	m, err := s.Member(ctx, world, target)
	if err != nil {
		return Member{}, "", err
	}
	h, err := s.readHook(ctx, world, target)
	if err != nil {
		return Member{}, "", apierror.FromStore("read webhook", err)
	}
	return m, PresenceOf(m, h, s.now()), nil
}

// Probe is a live probe of a member's webhook (webhook.Dispatcher.Probe):
// answered within the probe's timeout, and the round trip; a member without
// an enabled webhook is not answered (false, no error).
type Probe func(ctx context.Context, world, target string) (bool, time.Duration, error)

// Ping is the ping of target in world: NotFound when it is no member;
// unreachable when its registration is offline; reachable with the round
// trip (live true) when probe reaches its webhook — which is recorded on
// the member item and may announce a change of presence — and otherwise
// reachable when it polled within ReachableWithin or holds a stream open
// (live false). A nil probe skips the live probe.
//
// Cost: 2 round trips one after the other. First, side by side: the
// member (GetItem), its webhook (GetItem) and the probe (which reads the
// webhook too, and settles the request's guard before it POSTs, so
// nothing is sent for a request refused; on a cold instance these reads
// went beside the member key's, PingReads, and the guard is written then,
// alone). Then one write: the probe's outcome (UpdateItem), or with it
// the presence it changes (the commit of presence.changed); without a
// probe, that commit only when presence changed.
func (s *Service) Ping(ctx context.Context, world, target string, probe Probe) (ok bool, latency time.Duration, live bool, err error) {
	if !validMember(world, target) {
		return false, 0, false, memberNotFound(world, target)
	}
	var (
		m          Member
		h          Hook
		merr, herr error
		answered   bool
		rtt        time.Duration
		perr       error
		wg         sync.WaitGroup
	)
	wg.Go(func() { m, merr = s.Member(ctx, world, target) })
	wg.Go(func() { h, herr = s.readHook(ctx, world, target) })
	if probe != nil {
		wg.Go(func() { answered, rtt, perr = probe(ctx, world, target) })
	}
	wg.Wait()
	if merr != nil {
		return false, 0, false, merr
	}
	if m.RegistryOffline {
		return false, 0, false, nil
	}
	if herr != nil {
		return false, 0, false, apierror.FromStore("read webhook", herr)
	}
	if probe == nil {
		if err := s.settleWith(ctx, m, h); err != nil {
			return false, 0, false, err
		}
		return reachable(m, s.now()), 0, false, nil
	}
	if perr != nil {
		return false, 0, false, perr
	}
	if err := s.recordProbe(ctx, m, h, answered); err != nil {
		return false, 0, false, err
	}
	if answered {
		return true, rtt, true, nil
	}
	return reachable(m, s.now()), 0, false, nil
}

// recordProbe is RecordProbe on the member m and webhook h already read:
// one write, the probe's outcome with the presence.changed it causes, if
// any (a racing announcement wins, and the outcome is then written alone).
func (s *Service) recordProbe(ctx context.Context, m Member, h Hook, answered bool) error {
	now := s.now().UTC()
	attr, after := attrProbeFailAt, m
	after.ProbeFailAt = now
	if answered {
		attr, after = attrProbeOKAt, m
		after.ProbeOKAt = now
	}
	set := func(a store.Action) store.Action { return a.SetAttr(attr, store.N(now.UnixNano())) }
	if p := PresenceOf(after, h, now); p != m.announced() {
		var since time.Time
		if p == PresenceOffline && !after.LastPollAt.IsZero() {
			since = after.LastPollAt.Add(ReachableWithin)
		}
		ok, err := s.announce(ctx, m, p, since, set)
		if err != nil || ok {
			return err
		}
	}
	_, err := s.store.Write(ctx, set(store.Update(MemberKey(m.World, m.AWNID))).When(store.ItemExists()))
	if errors.Is(err, store.ErrConditionFailed) {
		return memberNotFound(m.World, m.AWNID)
	}
	if err != nil {
		return apierror.FromStore("record probe", err)
	}
	return nil
}

// silenceSince is when m's silence began: its last poll's ReachableWithin
// or its stream lease ran out, whichever was later (zero: it had neither).
func silenceSince(m Member) time.Time {
	var t time.Time
	if !m.LastPollAt.IsZero() {
		t = m.LastPollAt.Add(ReachableWithin)
	}
	return later(t, m.StreamUntil)
}

// pollAfterSilence is the poll at now of a member announced online whose
// silence (no poll within ReachableWithin, no stream open) the presence
// sweep has not announced yet, as the poll's first read showed it
// (before). It commits, in one transaction, the offline the silence
// meant (data.since: when it began), the online the poll brings and the
// poll's record — both presence.changed events, the member item's poll
// time (its presence stays online, so the member key item's does too)
// and the sweep's next look: done, and the poll is two round trips, not
// four (the webhook read, offline, then online, since one item cannot be
// in a transaction twice).
//
// Every input of the rule is a condition of that write: the member still
// announced online, its registration online, its poll and stream lease
// still as stale at now, and its webhook as read — absent, or with the
// attributes that decide whether it answered, and the member's probe
// outcomes, unchanged. A warm poll read the webhook beside the member
// (read.hookRead). Otherwise the webhook is taken to be absent, as a
// poller's usually is; when it is not, the failed condition returns it
// and the decision is made again on it (three round trips). When the
// webhook answered, the member stayed online: not done, and h is the
// webhook for the caller's decision. When the member changed under the
// poll (a racing poll, a sweep's announcement), not done, with h read
// again: the caller announces what is left on the presence conditions of
// its own writes.
func (s *Service) pollAfterSilence(ctx context.Context, read polled, now time.Time) (h Hook, done bool, err error) {
	before := read.member
	if PresenceOf(before, Hook{}, now) == PresenceOnline {
		return Hook{}, false, nil // its stream is open: no webhook decides
	}
	hit := read.hook // nil: absent, as read or as taken to be
	if read.hookRead {
		if h := decodeHook(hit); PresenceOf(before, h, now) == PresenceOnline {
			return h, false, nil
		}
	}
	for range 2 {
		ok, found, err := s.commitSilence(ctx, before, hit, now)
		switch {
		case err != nil:
			return Hook{}, false, err
		case ok:
			return Hook{}, true, nil
		case found == nil:
			// The member changed (or its webhook, held as read).
			h, err := s.readHook(ctx, before.World, before.AWNID)
			if err != nil {
				return Hook{}, false, apierror.FromStore("read webhook", err)
			}
			return h, false, nil
		}
		hit = found
		if h := decodeHook(hit); PresenceOf(before, h, now) == PresenceOnline {
			return h, false, nil
		}
	}
	return decodeHook(hit), false, nil
}

// commitSilence is pollAfterSilence's write, with its member's webhook
// item as read (nil: absent). It reports whether it committed and, when
// the webhook was in the way of an absent one, that webhook's item.
func (s *Service) commitSilence(ctx context.Context, before Member, hit store.Item, now time.Time) (bool, store.Item, error) {
	offline := presenceData{AWNID: before.AWNID, Presence: PresenceOffline}
	if since := silenceSince(before); !since.IsZero() {
		offline.Since = since.UTC().Format(time.RFC3339Nano)
	}
	var evs []Event
	for _, d := range []presenceData{offline, {AWNID: before.AWNID, Presence: PresenceOnline}} {
		ev, err := s.ids.NewEvent(before.World, PresenceChanged, Agents, "", d, now)
		if err != nil {
			return false, nil, internal(err)
		}
		evs = append(evs, ev)
	}
	cond := store.And(
		store.Eq(attrJoinedAt, store.N(before.JoinedAt.UnixNano())),
		store.Eq(attrPresence, store.S(PresenceOnline)),
		store.NotExists(attrRegistryOffline),
		store.Or(store.NotExists(attrLastPollAt), store.Lt(attrLastPollAt, store.N(now.Add(-ReachableWithin).UnixNano()))),
		store.Or(store.NotExists(attrStreamUntil), store.Le(attrStreamUntil, store.N(now.UnixNano()))),
	)
	hook := store.Check(WebhookKey(before.World, before.AWNID), store.ItemAbsent()).OnFailReturn()
	if hit != nil {
		// The webhook decides with the probes' outcomes: both as read.
		cond = store.And(cond, timeAsRead(attrProbeOKAt, before.ProbeOKAt), timeAsRead(attrProbeFailAt, before.ProbeFailAt))
		hook = store.Check(WebhookKey(before.World, before.AWNID), store.And(store.ItemExists(),
			unchanged(hit, hookAttrEnabled, hookAttrLastSuccessAt, hookAttrLastErrorAt)))
	}
	_, err := s.log.CommitAll(ctx, evs,
		store.Update(MemberKey(before.World, before.AWNID)).SetAttr(attrLastPollAt, store.N(now.UnixNano())).When(cond),
		hook,
		duePut(before, now.Add(ReachableWithin+time.Millisecond)))
	var cf *store.ConditionFailedError
	switch {
	case err == nil:
		return true, nil, nil
	case errors.As(err, &cf):
		if cf.Action == 1 && hit == nil {
			return false, cf.Item, nil
		}
		return false, nil, nil
	default:
		return false, nil, apierror.FromStore("announce presence", err)
	}
}

// timeAsRead is the condition that the time attribute attr still holds t
// (zero: absent), as decodeMember read it.
func timeAsRead(attr string, t time.Time) store.Cond {
	if t.IsZero() {
		return store.NotExists(attr)
	}
	return store.Eq(attr, store.N(t.UnixNano()))
}
