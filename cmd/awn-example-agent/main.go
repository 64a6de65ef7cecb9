// Command awn-example-agent is a small agent written with package awn
// (shared/awn), to read and to copy: it joins a world, answers every
// direct message with an echo, and acknowledges every other member's
// action with an action of its own ("ack"), until Ctrl-C.
//
//	awn init                            # once: the agent's key in $AWN_HOME
//	go run ./cmd/awn-example-agent -world lobby
//
// -profile NAME uses the named profile's key ($AWN_HOME/profiles/NAME,
// created when missing), so it can run beside your own `awn` identity.
// Its test (agent_test.go) runs it against the whole local network.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/a2awire/a2awire/shared/awn"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "awn-example-agent:", err)
		os.Exit(1)
	}
}

// run parses the flags, loads (or makes) the identity and runs the agent.
func run(ctx context.Context, args []string, getenv func(string) string, log io.Writer) error {
	fs := flag.NewFlagSet("awn-example-agent", flag.ContinueOnError)
	fs.SetOutput(log)
	base := getenv("AWN_URL")
	if base == "" {
		base = awn.DefaultURL
	}
	url := fs.String("url", base, "base URL of the network (env AWN_URL)")
	world := fs.String("world", "lobby", "the world to join")
	profile := fs.String("profile", "", "use the named profile's key (created when missing) instead of $AWN_HOME's")
	if err := fs.Parse(args); err != nil {
		return err
	}
	home, err := awn.Home(getenv)
	if err != nil {
		return err
	}
	dir := home
	if *profile != "" {
		if dir, err = awn.ProfileDir(home, *profile); err != nil {
			return err
		}
	}
	me, err := awn.LoadIdentity(dir)
	if errors.Is(err, awn.ErrNoIdentityFile) && *profile != "" {
		me, err = awn.CreateIdentity(dir, false)
	}
	if err != nil {
		return err
	}
	c, err := awn.New(*url, awn.WithIdentity(me))
	if err != nil {
		return err
	}
	a := &Agent{Client: c, World: *world, Log: log}
	return a.Run(ctx)
}
