package worldhttp_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/a2awire/a2awire/shared/world"
	"github.com/a2awire/a2awire/shared/worldhttp"
)

// errUnexpected is what a fake answers for a method the test did not set:
// it renders as a 500, which the test then sees.
var errUnexpected = errors.New("fake: unexpected call")

// fake implements every interface the handlers consume with function
// fields (the benbjohnson/wtf mock style) and counts the calls.
type fake struct {
	mu    sync.Mutex
	calls map[string]int

	GetWorldFn     func(ctx context.Context, w string) (world.Manifest, error)
	PutWorldFn     func(ctx context.Context, m world.Manifest, signer ed25519.PublicKey) (world.Manifest, bool, error)
	JoinFn         func(ctx context.Context, w string, pub ed25519.PublicKey, meta json.RawMessage) (world.Member, bool, error)
	LeaveFn        func(ctx context.Context, w, awnID string) error
	MembersFn      func(ctx context.Context, w string) ([]world.Member, error)
	MemberKeyFn    func(ctx context.Context, w, keyID string) (ed25519.PublicKey, string, error)
	SubmitActionFn func(ctx context.Context, w, awnID, action string, params json.RawMessage) (string, error)
	WaitEventsFn   func(ctx context.Context, w, awnID, after string, limit int, wait time.Duration) ([]world.Event, error)
	ReachableFn    func(ctx context.Context, w, target string) (bool, error)
	PublicEventsFn func(ctx context.Context, w, after string, limit int) (world.EventPage, error)
	// Now is the clock of the agents list's presence.
	Now     func() time.Time
	SendFn  func(ctx context.Context, w, from, to string, content json.RawMessage, contentType string) (worldhttp.Message, error)
	ReadFn  func(ctx context.Context, w, awnID string, o worldhttp.ReadOptions) ([]worldhttp.Message, error)
	AllowFn func(ctx context.Context, w, awnID string, op worldhttp.RateOp) error
}

func (f *fake) count(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[name]++
}

// Calls returns how often name was called.
func (f *fake) Calls(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

func (f *fake) GetWorld(ctx context.Context, w string) (world.Manifest, error) {
	f.count("GetWorld")
	if f.GetWorldFn == nil {
		return world.Manifest{}, errUnexpected
	}
	return f.GetWorldFn(ctx, w)
}

func (f *fake) PutWorld(ctx context.Context, m world.Manifest, signer ed25519.PublicKey) (world.Manifest, bool, error) {
	f.count("PutWorld")
	if f.PutWorldFn == nil {
		return world.Manifest{}, false, errUnexpected
	}
	return f.PutWorldFn(ctx, m, signer)
}

func (f *fake) Join(ctx context.Context, w string, pub ed25519.PublicKey, meta json.RawMessage) (world.Member, bool, error) {
	f.count("Join")
	if f.JoinFn == nil {
		return world.Member{}, false, errUnexpected
	}
	return f.JoinFn(ctx, w, pub, meta)
}

func (f *fake) LeaveAs(ctx context.Context, w, awnID, _ string) error {
	f.count("Leave")
	if f.LeaveFn == nil {
		return errUnexpected
	}
	return f.LeaveFn(ctx, w, awnID)
}

// MembersPage lists MembersFn's members in one page, presence by their
// polls alone.
func (f *fake) MembersPage(ctx context.Context, w string, o world.PageOptions) (world.MemberPage, error) {
	f.count("Members")
	if f.MembersFn == nil {
		return world.MemberPage{}, errUnexpected
	}
	ms, err := f.MembersFn(ctx, w)
	if err != nil {
		return world.MemberPage{}, err
	}
	out := world.MemberPage{}
	for _, m := range ms {
		out.Members = append(out.Members, world.MemberRow{Member: m, Presence: world.Presence(m, f.now())})
	}
	return out, nil
}

func (f *fake) MemberKey(ctx context.Context, w, keyID string) (ed25519.PublicKey, string, error) {
	f.count("MemberKey")
	if f.MemberKeyFn == nil {
		return nil, "", errUnexpected
	}
	return f.MemberKeyFn(ctx, w, keyID)
}

func (f *fake) Act(ctx context.Context, w, awnID, action string, params json.RawMessage) (world.Submitted, error) {
	f.count("SubmitAction")
	if f.SubmitActionFn == nil {
		return world.Submitted{}, errUnexpected
	}
	id, err := f.SubmitActionFn(ctx, w, awnID, action, params)
	return world.Submitted{ActionID: id}, err
}

// Poll answers WaitEventsFn's events, its cursor the last one's id (or
// after).
func (f *fake) PollAs(ctx context.Context, w, awnID, _, after string, limit int, wait time.Duration) (world.EventPage, error) {
	f.count("WaitEvents")
	if f.WaitEventsFn == nil {
		return world.EventPage{}, errUnexpected
	}
	evs, err := f.WaitEventsFn(ctx, w, awnID, after, limit, wait)
	if err != nil {
		return world.EventPage{}, err
	}
	cursor := after
	if len(evs) > 0 {
		cursor = evs[len(evs)-1].ID
	}
	return world.EventPage{Events: evs, Cursor: cursor}, nil
}

func (f *fake) PublicEvents(ctx context.Context, w, after string, limit int) (world.EventPage, error) {
	f.count("PublicEvents")
	if f.PublicEventsFn == nil {
		return world.EventPage{}, errUnexpected
	}
	return f.PublicEventsFn(ctx, w, after, limit)
}

// Ping is the rule of world.Service.Ping over ReachableFn (membership and
// polls) and the probe.
func (f *fake) Ping(ctx context.Context, w, target string, probe world.Probe) (bool, time.Duration, bool, error) {
	f.count("Reachable")
	if f.ReachableFn == nil {
		return false, 0, false, errUnexpected
	}
	polled, err := f.ReachableFn(ctx, w, target)
	if err != nil {
		return false, 0, false, err
	}
	if probe != nil {
		ok, rtt, err := probe(ctx, w, target)
		if err != nil {
			return false, 0, false, err
		}
		if ok {
			return true, rtt, true, nil
		}
	}
	return polled, 0, false, nil
}

func (f *fake) Submit(ctx context.Context, w, from, to string, content json.RawMessage, contentType string) (worldhttp.Sent, error) {
	f.count("Send")
	if f.SendFn == nil {
		return worldhttp.Sent{}, errUnexpected
	}
	m, err := f.SendFn(ctx, w, from, to, content, contentType)
	return worldhttp.Sent{Message: m}, err
}

func (f *fake) Read(ctx context.Context, w, awnID string, o worldhttp.ReadOptions) ([]worldhttp.Message, error) {
	f.count("Read")
	if f.ReadFn == nil {
		return nil, errUnexpected
	}
	return f.ReadFn(ctx, w, awnID, o)
}

func (f *fake) Allow(ctx context.Context, w, awnID string, op worldhttp.RateOp) error {
	f.count("Allow:" + string(op))
	if f.AllowFn == nil {
		return nil
	}
	return f.AllowFn(ctx, w, awnID, op)
}

func (f *fake) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}
