package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/a2awire/a2awire/shared/awn"
)

// Agent is the example agent: joined to World, it follows the world's
// events and answers them.
type Agent struct {
	Client *awn.Client
	World  string
	// Log gets a line per thing the agent does; nil is silent.
	Log io.Writer
	// OnJoined, when set, is called once the agent is a member.
	OnJoined func(awn.Membership)
	// OnEvent, when set, sees every event the agent gets, before it
	// answers it (its test counts them).
	OnEvent func(awn.Event)
	// OnWait, when set, hears when following the events waits or changes
	// course (a dropped stream, a busy server).
	OnWait func(awn.Wait)
}

func (a *Agent) logf(format string, args ...any) {
	if a.Log != nil {
		fmt.Fprintf(a.Log, format+"\n", args...)
	}
}

// Run joins the world and answers its events until ctx ends (nil) or the
// network refuses the agent (that error).
func (a *Agent) Run(ctx context.Context) error {
	me, ok := a.Client.Identity()
	if !ok {
		return awn.ErrNoIdentity
	}
	m, err := a.Client.Join(ctx, a.World, json.RawMessage(`{"kind":"example-agent"}`))
	if err != nil {
		if ctx.Err() != nil {
			// Stopped while joining (Ctrl-C at start-up, or a stop
			// that came as the join's answer was on its way): the
			// end asked for, not the network refusing the agent.
			return nil
		}
		return fmt.Errorf("join %s: %w", a.World, err)
	}
	a.logf("joined %s as %s (slot %d)", a.World, m.AWNID, m.Slot)
	if a.OnJoined != nil {
		a.OnJoined(m)
	}
	for ev, err := range a.Client.Events(ctx, a.World, awn.FollowOptions{OnWait: a.wait}) {
		if err != nil {
			return fmt.Errorf("events of %s: %w", a.World, err)
		}
		if a.OnEvent != nil {
			a.OnEvent(ev)
		}
		if err := a.answer(ctx, me.AWNID(), ev); err != nil {
			// One failed answer (a rate limit, a member who left) does
			// not stop the agent.
			a.logf("answering %s %s: %v", ev.Type, ev.EventID, err)
		}
	}
	return nil
}

func (a *Agent) wait(w awn.Wait) {
	a.logf("events: %v (waiting %s)", w.Err, w.Delay)
	if a.OnWait != nil {
		a.OnWait(w)
	}
}

// answer reacts to one event: a direct message is read whole and echoed to
// its sender; another member's action is acknowledged with an "ack" action
// naming it. The agent's own actions are not answered, or two example
// agents would acknowledge each other for ever.
func (a *Agent) answer(ctx context.Context, me string, ev awn.Event) error {
	if _, ok := ev.Message(); ok {
		// Reading consumes: each message is handed out, and echoed, once.
		inbox, err := a.Client.Messages(ctx, a.World, awn.MessageQuery{})
		if err != nil {
			return err
		}
		for _, msg := range inbox.Messages {
			if _, err := a.Client.SendText(ctx, a.World, msg.From, "echo: "+msg.Text()); err != nil {
				return err
			}
			a.logf("echoed %s from %s", msg.MessageID, msg.From)
		}
		return nil
	}
	if n, ok := ev.Action(); ok && n.AWNID != me && n.Action != "ack" {
		params, err := json.Marshal(map[string]string{"of": n.ActionID, "action": n.Action})
		if err != nil {
			return err
		}
		if _, _, err := a.Client.Act(ctx, a.World, "ack", params); err != nil {
			return err
		}
		a.logf("acknowledged %s %s by %s", n.Action, n.ActionID, n.AWNID)
	}
	return nil
}
