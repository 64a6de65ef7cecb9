package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/awn"
)

// TestRunWithProfile: the command makes its profile's key when missing,
// joins the world named by -world at AWN_URL, and ends cleanly when its
// context does; a bad flag or profile name is an error before any request.
func TestRunWithProfile(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := network(t)
	owner := client(t, base)
	if _, err := owner.CreateWorld(ctx, "arena", awn.WorldSpec{}); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Join(ctx, "arena", nil); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := map[string]string{"AWN_HOME": home, "AWN_URL": base}
	getenv := func(k string) string { return env[k] }

	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- run(runCtx, []string{"-world", "arena", "-profile", "echo"}, getenv, io.Discard) }()
	me, _ := owner.Identity()
	for ev, err := range owner.Events(ctx, "arena", awn.FollowOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		var who struct {
			AWNID string `json:"awnId"`
		}
		if ev.Type == awn.AgentJoined && json.Unmarshal(ev.Data, &who) == nil && who.AWNID != "" && who.AWNID != me.AWNID() {
			break // the agent joined
		}
	}
	stop()
	if err := <-ran; err != nil {
		t.Errorf("run ended with %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, "profiles", "echo", awn.KeyFile)); err != nil {
		t.Errorf("the profile's key: %v", err)
	}
	for _, args := range [][]string{{"-bogus"}, {"-profile", "../x"}} {
		if err := run(ctx, args, getenv, io.Discard); err == nil {
			t.Errorf("run %q: no error", args)
		}
	}
}

// TestRunStoppedWhileJoining: a stop that comes while the join is in
// flight ends the command cleanly (TestRunWithProfile stops it as soon as
// the join's event shows, which can be before the join's answer arrives),
// while a join the network refuses is still an error.
func TestRunStoppedWhileJoining(t *testing.T) {
	t.Parallel()
	base := network(t)
	env := map[string]string{"AWN_HOME": t.TempDir(), "AWN_URL": base}
	getenv := func(k string) string { return env[k] }
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	if err := run(stopped, []string{"-world", "arena", "-profile", "echo"}, getenv, io.Discard); err != nil {
		t.Errorf("stopped before the join answered: %v, want a clean end", err)
	}
	ctx, cancelRun := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelRun()
	if err := run(ctx, []string{"-world", "no-such-world", "-profile", "echo"}, getenv, io.Discard); err == nil {
		t.Error("a join of a world that does not exist ended cleanly, want its error")
	}
}
