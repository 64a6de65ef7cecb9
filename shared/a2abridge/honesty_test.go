package a2abridge_test

import (
	"context"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	a2acard "github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/a2awire/a2awire/shared/fixtures"
)

// goodInput is a valid input for every fixture capability.
var goodInput = map[string]map[string]any{
	"ping": {}, "latency-benchmark": {}, "word-count": {"text": "a b"}, "messy-echo": {"x": 1},
	"translation":  {"text": "hello", "target_lang": "es", "source_lang": "en"},
	"record-entry": {"account": "honest", "amount_cents": 1}, "balance": {"account": "honest"},
}

// TestEveryCardIsHonest resolves every card — the network's, a world's and
// each provider's through the bridge — with a2a-go and calls what it
// advertises: through every interface, every skill with SendMessage, then
// GetTask and CancelTask on the Task; SendStreamingMessage where streaming
// is claimed (and it must stream: a working Task, the artifact, the final
// status). No card may claim push notifications (no route serves A2A push
// configs), and a card without interfaces must leave a2a-go's client
// nothing to open.
func TestEveryCardIsHonest(t *testing.T) {
	n := newNetwork(t)
	ctx := context.Background()
	resolve := func(base string) *a2a.AgentCard {
		card, err := a2acard.NewResolver(n.srv.Client()).Resolve(ctx, base)
		if err != nil {
			t.Fatalf("resolve %s: %v", base, err)
		}
		return card
	}
	bases := []string{n.srv.URL, n.srv.URL + "/v0/worlds/lobby"}
	for _, f := range fixtures.All() {
		bases = append(bases, n.srv.URL+"/a2a/"+f.Name)
	}
	for _, base := range bases {
		card := resolve(base)
		if card.Capabilities.PushNotifications {
			t.Errorf("%s claims push notifications, which nothing serves", base)
		}
		if len(card.SupportedInterfaces) == 0 {
			if card.Capabilities.Streaming {
				t.Errorf("%s claims streaming with no interface", base)
			}
			if _, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(n.srv.Client())); err == nil {
				t.Errorf("%s: a2a-go opened a client on a card with no interface", base)
			}
			continue
		}
		for _, iface := range card.SupportedInterfaces {
			one := *card
			one.SupportedInterfaces = []*a2a.AgentInterface{iface}
			c, err := a2aclient.NewFromCard(ctx, &one, a2aclient.WithJSONRPCTransport(n.srv.Client()))
			if err != nil {
				t.Fatalf("%s interface %s %s: %v", base, iface.URL, iface.ProtocolBinding, err)
			}
			for _, skill := range card.Skills {
				in, ok := goodInput[skill.ID]
				if !ok {
					t.Fatalf("%s: skill %s has no known input", base, skill.ID)
				}
				task := completed(t, c, dataMessage("", skill.ID, in))
				if got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID}); err != nil || got.Status.State != a2a.TaskStateCompleted {
					t.Errorf("%s GetTask %s: %+v %v", base, task.ID, got, err)
				}
				if _, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID}); err == nil {
					t.Errorf("%s CancelTask of an ended task succeeded", base)
				}
			}
			if card.Capabilities.Streaming {
				skill := card.Skills[0]
				var events int
				var last a2a.Event
				for ev, err := range c.SendStreamingMessage(ctx, dataMessage("", skill.ID, goodInput[skill.ID])) {
					if err != nil {
						t.Fatalf("%s stream: %v", base, err)
					}
					events++
					last = ev
				}
				st, ok := last.(*a2a.TaskStatusUpdateEvent)
				if events != 3 || !ok || st.Status.State != a2a.TaskStateCompleted {
					t.Errorf("%s stream: %d events ending with %T, want 3 ending with the completed status", base, events, last)
				}
			}
		}
	}
}
