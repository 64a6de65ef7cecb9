package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"time"

	"github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/world"
)

// batchActions and batchMembers size row 10: 990 actions, 30 rounds of
// 33 members, so every transaction of the batched run is full (33
// distinct members' actions) and the baseline writes the same events.
const (
	batchActions = 990
	batchMembers = 33
)

// countingStore counts the Writes that reach the table.
type countingStore struct {
	store.Store
	writes int
}

func (c *countingStore) Write(ctx context.Context, acts ...store.Action) ([]store.Item, error) {
	c.writes++
	return c.Store.Write(ctx, acts...)
}

// batchRow is row 10: one world's actions committed one transaction after
// another, as a world's commits go in AWS (DynamoDB runs one transaction at
// a time on its event head), first one action a transaction (SubmitAction,
// what POST …/actions does in a world that does not batch), then queued
// and committed by CommitQueued (world-commit, in a world with
// batchActions), both on DynamoDB Local behind the latency proxy, which
// stands in for a round trip's time in AWS. The target is on what batching
// controls, the transactions on the head (the serialized resource); the
// ratio of actions a second, measured in the same run, depends on how a
// transaction's time grows with its size, which DynamoDB Local does not
// share with AWS (its time grows about 0.65 ms an action).
func batchRow(ctx context.Context, server *dynamolocal.Server, table string, proxy time.Duration) Row {
	row := Row{ID: "10", Name: fmt.Sprintf("one world's actions through its serialized commits: batched (world-commit) ÷ one transaction each, over a %v store", proxy),
		Target: "≤ 1/30 the transactions on the world's head (33 actions each); actions/s ratio reported",
		Method: fmt.Sprintf("%d actions of %d members of one world, committed one after another on DynamoDB Local behind a proxy adding %v to every call: "+
			"baseline world.Log.Commit per action, the commit SubmitAction makes (1 transaction of the event, its member's check and the head each); batched world.Service.CommitQueued over the same actions queued by Act (one call: transactions of 33); "+
			"same process, same table, baseline first", batchActions, batchMembers, proxy)}
	px, err := newDelayProxy(server.Endpoint(), proxy)
	if err != nil {
		return failed(row, err)
	}
	defer px.Close()
	st := &countingStore{Store: dynamo.New(dynamo.LocalClient(px.URL), table)}
	q := &memoryQueue{}
	evIDs := world.NewIDs()
	s := world.New(st, world.WithActionQueue(q), world.WithIDs(evIDs))
	log := world.NewLog(st, evIDs, nil)
	run := func(id string, batched bool) (perSec float64, writes int, err error) {
		spec := world.Manifest{ID: id, Description: "bench", BatchActions: batched}
		k := ed25519Key(0x1000)
		if _, _, err := s.PutWorld(ctx, spec, k); err != nil {
			return 0, 0, err
		}
		var ids []string
		for i := range batchMembers {
			m, _, err := s.Join(ctx, id, ed25519Key(0x1100+i), nil)
			if err != nil {
				return 0, 0, err
			}
			ids = append(ids, m.AWNID)
		}
		q.msgs = q.msgs[:0]
		st.writes = 0
		start := time.Now()
		if !batched {
			// The commit SubmitAction makes, alone: the event beside its
			// member's check, one transaction each.
			for i := range batchActions {
				a := ids[i%batchMembers]
				ev, err := evIDs.NewEvent(id, world.ActionSubmitted, world.Agents, "", map[string]any{"actionId": evIDs.New(time.Now()), "awnId": a, "action": "move", "params": map[string]any{}}, time.Now())
				if err != nil {
					return 0, 0, err
				}
				if _, err := log.Commit(ctx, ev, world.MemberCheck(id, a)); err != nil {
					return 0, 0, err
				}
			}
			return batchActions / time.Since(start).Seconds(), st.writes, nil
		}
		for i := range batchActions {
			if _, err := s.Act(ctx, id, ids[i%batchMembers], "move", json.RawMessage(`{}`)); err != nil {
				return 0, 0, err
			}
		}
		var qs []world.QueuedAction
		for _, body := range q.msgs {
			a, err := world.ParseQueuedAction(body)
			if err != nil {
				return 0, 0, err
			}
			qs = append(qs, a)
		}
		start = time.Now() // the commits only: the queueing is the requests' own
		for _, err := range s.CommitQueued(ctx, qs) {
			if err != nil {
				return 0, 0, err
			}
		}
		return batchActions / time.Since(start).Seconds(), st.writes, nil
	}
	base, baseWrites, err := run("bench-commit-one", false)
	if err != nil {
		return failed(row, fmt.Errorf("one at a time: %w", err))
	}
	fast, fastWrites, err := run("bench-commit-batched", true)
	if err != nil {
		return failed(row, fmt.Errorf("batched: %w", err))
	}
	ratio := fast / base
	row.Values = map[string]float64{"baseline_actions_per_s": base, "batched_actions_per_s": fast, "ratio": ratio,
		"baseline_transactions": float64(baseWrites), "batched_transactions": float64(fastWrites)}
	row.Result = fmt.Sprintf("%d transactions against %d for %d actions; %.1f× the actions/s (%.0f against %.0f: a commit of 100 actions took %.0f ms, one of 3 %.1f ms, the proxy's %v in each)",
		fastWrites, baseWrites, batchActions, ratio, fast, base, 1000*batchActions/fast/float64(fastWrites), 1000/base, proxy)
	row.Status = within(fastWrites*30 <= baseWrites && ratio > 1)
	return row
}

// ed25519Key is a bench key from a number.
func ed25519Key(n int) ed25519.PublicKey {
	seed := make([]byte, ed25519.SeedSize)
	copy(seed, fmt.Sprintf("bench-batch-%d", n))
	return ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
}

// memoryQueue keeps the bodies Act sends.
type memoryQueue struct{ msgs []string }

func (q *memoryQueue) Send(_ context.Context, msgs ...queue.Message) error {
	for _, m := range msgs {
		q.msgs = append(q.msgs, m.Body)
	}
	return nil
}
