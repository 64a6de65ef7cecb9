package queue

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Memory is an in-process Queue with SQS's semantics (see the package
// doc). Its clock is injectable: after moving a fake clock, call Wake so
// waiting receivers look again.
type Memory struct {
	cfg Config
	dlq *Memory
	now func() time.Time

	mu      sync.Mutex
	msgs    []*memMsg // in send order; deleted ones until compacted
	live    int       // messages of msgs not deleted
	byRcpt  map[string]*memMsg
	changed chan struct{}
	seq     int
}

type memMsg struct {
	id       string
	body     string
	sentAt   time.Time
	visible  time.Time // visible from this time on
	receives int
	receipt  string // the latest receipt; "" before the first receive
	deleted  bool
	held     bool // received, and neither deleted nor given a new visibility since
}

// MemoryOption configures a Memory.
type MemoryOption func(*Memory)

// WithClock sets the clock (tests inject a fake one and call Wake).
func WithClock(now func() time.Time) MemoryOption { return func(m *Memory) { m.now = now } }

// WithDeadLetter sets the queue messages move to after cfg.MaxReceiveCount
// receives.
func WithDeadLetter(dlq *Memory) MemoryOption { return func(m *Memory) { m.dlq = dlq } }

// NewMemory returns an empty queue with cfg's settings.
func NewMemory(cfg Config, opts ...MemoryOption) *Memory {
	m := &Memory{cfg: cfg, now: time.Now, changed: make(chan struct{}), byRcpt: map[string]*memMsg{}}
	for _, o := range opts {
		o(m)
	}
	if m.cfg.VisibilityTimeout <= 0 {
		m.cfg.VisibilityTimeout = 30 * time.Second // SQS's default
	}
	return m
}

// Wake makes waiting receivers look again (after a fake clock moved).
func (m *Memory) Wake() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notifyLocked()
}

func (m *Memory) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// Send enqueues msgs.
func (m *Memory) Send(_ context.Context, msgs ...Message) error {
	for _, msg := range msgs {
		if msg.Delay < 0 || msg.Delay > MaxDelay {
			return fmt.Errorf("queue: delay %s outside 0..%s", msg.Delay, MaxDelay)
		}
		if len(msg.Body) == 0 || len(msg.Body) > MaxBody {
			return fmt.Errorf("queue: body of %d bytes outside 1..%d", len(msg.Body), MaxBody)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for _, msg := range msgs {
		m.seq++
		m.msgs = append(m.msgs, &memMsg{id: fmt.Sprintf("m-%d-%s", m.seq, rand.Text()[:8]), body: msg.Body, sentAt: now, visible: now.Add(msg.Delay)})
		m.live++
	}
	m.notifyLocked()
	return nil
}

// Receive returns up to max visible messages, waiting up to wait (real
// time) for one.
func (m *Memory) Receive(ctx context.Context, max int, wait time.Duration) ([]Received, error) {
	if max < 1 || max > MaxBatch {
		return nil, fmt.Errorf("queue: receive of %d outside 1..%d", max, MaxBatch)
	}
	deadline := time.Now().Add(wait)
	for {
		out, next, ch := m.take(max)
		if len(out) > 0 {
			return out, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil
		}
		// Wake at the earliest of: a change, the next message's visibility
		// on this clock (as real time; a fake clock's Wake comes first), the
		// wait's end.
		t := time.NewTimer(min(left, next))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
}

// take receives up to max visible messages; with none, it returns how long
// until the next becomes visible and the channel that closes on a change.
func (m *Memory) take(max int) ([]Received, time.Duration, chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.msgs) > 64 && m.live < len(m.msgs)/2 {
		m.msgs = slices.DeleteFunc(m.msgs, func(x *memMsg) bool { return x.deleted })
	}
	now := m.now()
	var out []Received
	next := time.Hour
	for i := 0; i < len(m.msgs) && len(out) < max; i++ {
		msg := m.msgs[i]
		if msg.deleted {
			continue
		}
		if msg.visible.After(now) {
			next = min(next, msg.visible.Sub(now))
			continue
		}
		if m.cfg.MaxReceiveCount > 0 && msg.receives >= m.cfg.MaxReceiveCount && m.dlq != nil {
			// Redrive: it moves, keeping its id, body and send time, with
			// a fresh receive count.
			m.removeLocked(msg)
			m.dlq.redrive(msg)
			continue
		}
		msg.receives++
		delete(m.byRcpt, msg.receipt)
		msg.receipt = fmt.Sprintf("%s/%d/%s", msg.id, msg.receives, rand.Text()[:8])
		m.byRcpt[msg.receipt] = msg
		msg.visible = now.Add(m.cfg.VisibilityTimeout)
		msg.held = true
		out = append(out, Received{ID: msg.id, Body: msg.body, Receipt: msg.receipt, ReceiveCount: msg.receives, SentAt: msg.sentAt})
	}
	return out, next, m.changed
}

func (m *Memory) redrive(msg *memMsg) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.msgs = append(m.msgs, &memMsg{id: msg.id, body: msg.body, sentAt: msg.sentAt, visible: m.now()})
	m.live++
	m.notifyLocked()
}

// removeLocked marks msg deleted; take compacts.
func (m *Memory) removeLocked(msg *memMsg) {
	msg.deleted = true
	delete(m.byRcpt, msg.receipt)
	m.live--
}

// Delete removes the message received with receipt.
func (m *Memory) Delete(_ context.Context, receipt string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	msg := m.byRcpt[receipt]
	if msg == nil {
		return ErrReceiptInvalid
	}
	m.removeLocked(msg)
	m.notifyLocked()
	return nil
}

// ChangeVisibility makes the message received with receipt visible d from
// now.
func (m *Memory) ChangeVisibility(_ context.Context, receipt string, d time.Duration) error {
	if d < 0 || d > MaxVisibility {
		return fmt.Errorf("queue: visibility %s outside 0..%s", d, MaxVisibility)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	msg := m.byRcpt[receipt]
	if msg == nil {
		return ErrReceiptInvalid
	}
	msg.visible = m.now().Add(d)
	msg.held = false
	m.notifyLocked()
	return nil
}

// Held is how many messages a receiver holds: received, still invisible
// from that receive, and neither deleted nor given a new visibility since.
// A test that moves a fake clock waits for none to be held first, or the
// move would expire a receive still being worked on and deliver it twice.
func (m *Memory) Held() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	now, n := m.now(), 0
	for _, msg := range m.msgs {
		if !msg.deleted && msg.held && msg.visible.After(now) {
			n++
		}
	}
	return n
}

// Len is how many messages the queue holds, visible or not.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live
}
