package world

import "context"

// Follower reads one member's events after a cursor, again and again: the
// read side of an event stream. It is a long poll that never answers:
// Open marks the member as polled (presence, as a poll does), each Read is
// one check of the poll loop, and Refresh marks it again, so that a member
// holding a stream open stays online by the one presence rule (polled
// within ReachableWithin) and a member that left or was removed is told so.
// A Follower belongs to one stream (one goroutine); the Service behind it
// is shared.
type Follower struct {
	s      *Service
	world  string
	reader Member
	cursor string
	// first is the page Follow read, which the first Read returns.
	first  []Event
	unread bool
}

// Follow opens a follower of the events of world visible to awnID after
// `after` ("" = from the oldest kept; otherwise an id this world returned,
// else Invalid) and reads its first page, as a poll does: the head and the
// member item side by side, then the member's poll record (NotJoined for a
// non-member; presence.changed when it comes online) beside the page's
// Queries, so that a stream (re)opened has its first events two round
// trips in, whether or not it changes presence. Cost: 2 GetItem, then 1
// UpdateItem, or the presence.changed transaction when it comes online
// (after a silence not yet announced, with the missed offline in it), and
// 2 Queries when the head is past the cursor (2 more per event shard past
// the first: a shared shard and the member's private one).
func (s *Service) Follow(ctx context.Context, world, awnID, after string) (*Follower, error) {
	_, after, err := pollArgs(MaxEventLimit, after, s.now())
	if err != nil {
		return nil, err
	}
	if !validMember(world, awnID) {
		return nil, notJoined(world)
	}
	head, read, err := s.headAndMember(ctx, world, awnID)
	if err != nil {
		return nil, err
	}
	p, m, err := s.eventsAt(ctx, world, awnID, after, MaxEventLimit, head, func() (Member, error) { return s.markPolledRead(ctx, read) })
	if err != nil {
		return nil, err
	}
	return &Follower{s: s, world: world, reader: m, cursor: p.Cursor, first: p.Events, unread: true}, nil
}

// Read returns the next events visible to the member, up to MaxEventLimit,
// oldest first, and moves the cursor past them (and past events it may not
// see, never past one it may). Read after Read sees every visible event
// exactly once, in id order, as polls passing their cursor do. A full page
// (MaxEventLimit events) means more may be waiting. The first Read
// returns the page Follow read, with no call. Cost: 1 GetItem (the head),
// then, only when the head has moved past the cursor, 2 Queries (2 more
// per event shard past the first).
func (f *Follower) Read(ctx context.Context) ([]Event, error) {
	if f.unread {
		evs := f.first
		f.first, f.unread = nil, false
		return evs, nil
	}
	p, err := f.s.events(ctx, f.world, f.reader, f.cursor, MaxEventLimit)
	if err != nil {
		return nil, err
	}
	f.cursor = p.Cursor
	return p.Events, nil
}

// Refresh marks the member as polled again, as a poll does (presence stays
// online; presence.changed when it had gone offline), and takes its
// membership as it is now: NotJoined once it has left or was removed.
// Cost: 1 UpdateItem.
func (f *Follower) Refresh(ctx context.Context) error {
	m, err := f.s.markPolled(ctx, f.world, f.reader.AWNID)
	if err != nil {
		return err
	}
	f.reader = m
	return nil
}

// Cursor is where the next Read starts: the last event id read, or further
// (see Read).
func (f *Follower) Cursor() string { return f.cursor }
