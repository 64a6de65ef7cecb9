package a2abridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/a2awire/a2awire/shared/store"
)

// Task items: one per (agent, task id), the Task as A2A JSON.
//
//	item   pk                              sk    type     attributes
//	task   A2ATASK#<agent>#<task id>       TASK  a2atask  task (JSON), state, expiresAt
const (
	taskPrefix = "A2ATASK#"
	taskSK     = "TASK"
	typeTask   = "a2atask"
	attrTask   = "task"
	attrState  = "state"
	attrType   = "type"
	attrExpiry = "expiresAt"
)

// TaskTTL is how long a Task is kept for GetTask: as long as a provider
// keeps a task id's record (the provider kit's idempotency records live
// 24 h), so a Task outlives no answer a retry of its message could replay.
const TaskTTL = 24 * time.Hour

// errNoTask is a task id this agent has no (unexpired) Task for.
var errNoTask = errors.New("a2abridge: no such task")

// taskStore keeps the bridge's Tasks in the table.
type taskStore struct {
	st  store.Store
	now func() time.Time
}

func taskKey(agent, id string) store.Key {
	return store.Key{PK: taskPrefix + agent + "#" + id, SK: taskSK}
}

// get returns the stored Task JSON of (agent, id), or errNoTask when there
// is none or it has expired (checked from the stored expiry, not from the
// table's TTL, which deletes late).
func (s *taskStore) get(ctx context.Context, agent, id string) (json.RawMessage, error) {
	it, err := s.st.Get(ctx, taskKey(agent, id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNoTask
	}
	if err != nil {
		return nil, fmt.Errorf("a2abridge: read task: %w", err)
	}
	if exp, err := it.Int(attrExpiry); err != nil || exp <= s.now().Unix() {
		return nil, errNoTask
	}
	raw := it.Str(attrTask)
	if raw == "" {
		return nil, fmt.Errorf("a2abridge: task item %s has no task", taskKey(agent, id))
	}
	return json.RawMessage(raw), nil
}

// put stores task (its JSON) in state, replacing what is there unless that
// is a completed Task and this one is not: a retry of a message whose first
// answer completed (a concurrent duplicate the provider refused as in
// progress, a failure after the success) never hides the result. It
// returns the Task that is stored afterwards.
func (s *taskStore) put(ctx context.Context, agent, id, state string, task json.RawMessage) (json.RawMessage, error) {
	k := taskKey(agent, id)
	item := store.Item{
		attrType:   store.S(typeTask),
		attrTask:   store.S(string(task)),
		attrState:  store.S(state),
		attrExpiry: store.ExpiresAt(s.now().Add(TaskTTL)),
	}
	act := store.Put(k, item)
	if state != stateCompleted {
		act = act.When(store.Or(store.ItemAbsent(), store.Ne(attrState, store.S(stateCompleted)))).OnFailReturn()
	}
	_, err := s.st.Write(ctx, act)
	var cf *store.ConditionFailedError
	if errors.As(err, &cf) {
		// A completed Task is there: it is the answer. An expired one is
		// replaced, as if absent.
		if stored, gerr := s.get(ctx, agent, id); gerr == nil {
			return stored, nil
		}
		if _, err = s.st.Write(ctx, store.Put(k, item)); err == nil {
			return task, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("a2abridge: store task: %w", err)
	}
	return task, nil
}
