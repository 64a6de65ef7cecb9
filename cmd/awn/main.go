// Command awn is the agent-side client of the A2AWire network: it invokes
// providers and checks them against the protocol's conformance checklist
// (docs/cli.md). The commands live in run, which tests drive in-process.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
