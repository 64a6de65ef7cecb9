package deleter_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/a2awire/a2awire/functions/world-deleter/deleter"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/bolt"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/capacity"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/store/storetest"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/world"
)

// bulk writes items 100 to a Write.
type bulk struct {
	st   store.Store
	acts []store.Action
	n    int
}

func (b *bulk) put(k store.Key, it store.Item) {
	b.acts = append(b.acts, store.Put(k, it))
	b.n++
	if len(b.acts) == store.MaxActions {
		b.flush()
	}
}

func (b *bulk) flush() {
	if len(b.acts) == 0 {
		return
	}
	if _, err := b.st.Write(context.Background(), b.acts...); err != nil {
		panic(err)
	}
	b.acts = b.acts[:0]
}

// seedBulk writes, 100 items a Write, what a world of members members,
// messages messages and hooks webhooks holds, in the domains' keys: per
// member its member, member-key, roster and rate-window items and its
// agent.joined event; per message the inbox item and its private
// message.received; per webhook the webhook item, a pending retry and a
// dead letter. The world itself is created by PutWorld.
func seedBulk(b *testing.B, st store.Store, w string, members, messages, hooks int) int {
	ctx := context.Background()
	if _, _, err := world.New(st).PutWorld(ctx, world.Manifest{ID: w, Category: "big"}, key(0)); err != nil {
		b.Fatal(err)
	}
	ids := world.NewIDs()
	t := time.Now()
	wr := &bulk{st: st}
	awn := func(i int) string { return auth.AWNID(key(1 + i)) }
	for i := range members {
		a, k := awn(i), auth.KeyID(key(1+i))
		wr.put(world.MemberKey(w, a), store.Item{world.AttrType: store.S(world.TypeMember), "awnId": store.S(a), "keyId": store.S(k)})
		wr.put(world.MemberKeyKey(w, k), store.Item{world.AttrType: store.S(world.TypeMemberKey), "awnId": store.S(a)})
		wr.put(world.RosterKey(w, a), store.Item{world.AttrType: store.S(world.TypeRoster), "awnId": store.S(a)})
		wr.put(store.Key{PK: "RATE#" + w + "#" + a, SK: "send#1"}, store.Item{world.AttrType: store.S("ratewindow")})
		wr.put(store.Key{PK: world.SharedEventsPK(w), SK: ids.New(t)}, store.Item{world.AttrType: store.S(world.TypeEvent)})
	}
	for i := range messages {
		to := awn(i % members)
		id := ids.New(t)
		wr.put(store.Key{PK: world.InboxPK(w, to), SK: "MSG#" + id}, store.Item{world.AttrType: store.S("message")})
		wr.put(store.Key{PK: world.PrivateEventsPK(w, to), SK: id}, store.Item{world.AttrType: store.S(world.TypeEvent)})
	}
	for i := range hooks {
		a := awn(i)
		wr.put(world.WebhookKey(w, a), store.Item{world.AttrType: store.S(webhook.TypeWebhook)})
		wr.put(store.Key{PK: webhook.RetryPK(w, a), SK: "E1"}, store.Item{world.AttrType: store.S(webhook.TypeRetry),
			store.AttrGSI1PK: store.S(webhook.DuePK(i % webhook.Shards)), store.AttrGSI1SK: store.S(fmt.Sprintf("%015d#%s#%s", i, w, a))})
		wr.put(store.Key{PK: webhook.DeadLetterPK(w, a), SK: "E0"}, store.Item{world.AttrType: store.S(webhook.TypeDeadLetter)})
	}
	wr.flush()
	return wr.n
}

// BenchmarkPurge deletes a world of 1,000 members, 10,000 messages and 50
// webhooks (about 26,000 items) on each engine and reports its calls:
// go test -run XXX -bench BenchmarkPurge -benchtime 1x ./functions/world-deleter/deleter
// (DynamoDB Local takes minutes: select an engine with -bench 'BenchmarkPurge/memory').
// After the purge no item of the world is left in any partition it had.
func BenchmarkPurge(b *testing.B) {
	const members, messages, hooks = 1000, 10000, 50
	engines := []struct {
		name string
		open func(b *testing.B) (store.Store, func() map[string]int)
	}{
		{"memory", func(b *testing.B) (store.Store, func() map[string]int) { return memory.New(), nil }},
		{"bolt", func(b *testing.B) (store.Store, func() map[string]int) {
			st, err := bolt.Open(b.TempDir() + "/purge.db")
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = st.Close() })
			return st, nil
		}},
		{"dynamo", func(b *testing.B) (store.Store, func() map[string]int) {
			m := capacity.New()
			client, table := dynamolocal.NewTable(b, local, m.Option())
			return dynamo.New(client, table), func() map[string]int { return m.Take().Calls() }
		}},
	}
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				st, meter := e.open(b)
				items := seedBulk(b, st, "big", members, messages, hooks)
				counted := &storetest.Counting{Store: st}
				s := deleter.Service(counted)
				if err := s.DeleteWorld(context.Background(), "big", auth.KeyID(key(0))); err != nil {
					b.Fatal(err)
				}
				if meter != nil {
					meter()
				}
				counted.Take()
				b.StartTimer()
				start := time.Now()
				done, err := s.Purge(context.Background(), "big", world.PurgeOptions{})
				took := time.Since(start)
				b.StopTimer()
				if err != nil || !done {
					b.Fatalf("purge: done %v, %v", done, err)
				}
				calls := counted.Take()
				b.ReportMetric(float64(items), "items")
				b.ReportMetric(float64(calls[1]), "queries")
				b.ReportMetric(float64(calls[2]), "writes")
				if meter != nil {
					b.Logf("DynamoDB calls: %v", meter())
				}
				b.Logf("%d items (%d members, %d messages, %d webhooks) purged in %v: {gets, queries, writes} = %v", items, members, messages, hooks, took.Round(time.Millisecond), calls)
				for i := range members {
					a := auth.AWNID(key(1 + i))
					for _, pk := range append(deleter.Partitions("big", a), world.InboxPK("big", a), world.PrivateEventsPK("big", a)) {
						if p, err := st.Query(context.Background(), store.Query{PK: pk, Limit: 1}); err != nil || len(p.Items) > 0 {
							b.Fatalf("partition %s after the purge: %v %v", pk, p.Items, err)
						}
					}
				}
				for _, pk := range []string{world.WorldPK("big"), world.SharedEventsPK("big"), world.EventHeadKey("big").PK, world.DeletionKey("big").PK} {
					if p, err := st.Query(context.Background(), store.Query{PK: pk, Limit: 1}); err != nil || len(p.Items) > 0 {
						b.Fatalf("partition %s after the purge: %v %v", pk, p.Items, err)
					}
				}
			}
		})
	}
}
