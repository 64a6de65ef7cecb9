package scalemodel_test

import (
	"testing"

	"github.com/a2awire/a2awire/shared/scalemodel"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/world"
)

// TestListingShardsMatchTheWorld keeps the model's shards the listing's.
func TestListingShardsMatchTheWorld(t *testing.T) {
	if scalemodel.ListingShards != world.ListingShards {
		t.Fatalf("model: %d listing shards; shared/world writes %d", scalemodel.ListingShards, world.ListingShards)
	}
}

// TestEventShardsMatchTheWorld keeps the model's event shards the most a
// world may set.
func TestEventShardsMatchTheWorld(t *testing.T) {
	if scalemodel.EventShards != world.MaxEventShards {
		t.Fatalf("model: %d event shards; shared/world allows %d", scalemodel.EventShards, world.MaxEventShards)
	}
}

// TestActionsPerCommitMatchesTheStore keeps the model's batch the one a
// transaction holds.
func TestActionsPerCommitMatchesTheStore(t *testing.T) {
	if want := (store.MaxActions - 1) / 3; scalemodel.ActionsPerCommit != want {
		t.Fatalf("model: %d actions a commit; a transaction of %d actions holds %d", scalemodel.ActionsPerCommit, store.MaxActions, want)
	}
}

// TestMessagesPerCommitMatchesTheStore keeps the model's batch of
// messages the one a transaction holds.
func TestMessagesPerCommitMatchesTheStore(t *testing.T) {
	if want := (store.MaxActions - 2) / 4; scalemodel.MessagesPerCommit != want {
		t.Fatalf("model: %d messages a commit; a transaction of %d actions holds %d", scalemodel.MessagesPerCommit, store.MaxActions, want)
	}
}

// TestModelLoads pins the hottest key of each workload and its load, the
// figures docs/scale.md's table states.
func TestModelLoads(t *testing.T) {
	for _, c := range []struct {
		w     scalemodel.Workload
		key   string
		units float64
	}{
		{scalemodel.WorldEvents(), "EVENTHEAD#<world>", 10000},
		{scalemodel.ShardedWorldEvents(), "EVENTHEAD#<world>", 10000},
		{scalemodel.BatchedWorldEvents(), "EVENTS#<world>#s<n>", 625},
		{scalemodel.InboxMessages(), "AWN#<to>", 2000},
		{scalemodel.BatchedInboxMessages(), "INBOX#<world>#<to>#s<n>", 500},
		{scalemodel.FanOut(), "WHSTATS#<world>#<awnId>", 0.1},
		{scalemodel.RegistryJoins(), "gsi1:WORLDS#mem#*#<n>", 500},
	} {
		l := c.w.Loads()
		if len(l) == 0 || l[0].Key != c.key || l[0].Units != c.units || l[0].Over != c.units/scalemodel.PartitionWriteUnits {
			t.Errorf("%s: hottest %+v, want %s at %.0f units/s", c.w.Name, l, c.key, c.units)
		}
		for i := 1; i < len(l); i++ {
			if l[i].Units > l[i-1].Units {
				t.Errorf("%s: loads not hottest first: %+v", c.w.Name, l)
			}
		}
	}
}
