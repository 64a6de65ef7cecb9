// Command dynamodb-local runs a command beside one DynamoDB Local:
//
//	dynamodb-local -- go test -race ./...
//
// It starts the server (shared/store/dynamo/dynamolocal: the jar from
// ./node_modules on Java 17, in memory, on a free loopback port), runs the
// command with A2AWIRE_DYNAMODB_LOCAL set to the server's endpoint, stops
// the server when the command ends and exits with the command's status.
// Every test binary the command starts attaches to that server instead of
// starting a JVM of its own (about 5 s of CPU each); make test runs its Go
// tests this way. Run under A2AWIRE_DYNAMODB_LOCAL already, it starts
// nothing and the command shares that server.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
)

func main() {
	code, err := run(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "dynamodb-local:", err)
	}
	os.Exit(code)
}

func run(args []string) (int, error) {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return 2, errors.New("usage: dynamodb-local -- command [args...]")
	}
	// Under another dynamodb-local (make test runs targets that use it
	// too), the command shares that server.
	start := dynamolocal.StartPerKey
	if os.Getenv(dynamolocal.EndpointEnv) != "" {
		start = dynamolocal.Start
	}
	s, err := start()
	if err != nil {
		return 1, err
	}
	defer s.Stop()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), dynamolocal.EndpointEnv+"="+s.Endpoint())
	// Ctrl-C reaches the command through the terminal's process group and a
	// SIGTERM is passed on; either way this process waits for the command
	// to end and then stops the server (the JVM also dies with this
	// process: see dynamolocal's Pdeathsig).
	signal.Ignore(syscall.SIGINT)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	if err := cmd.Start(); err != nil {
		return 1, err
	}
	go func() {
		for sig := range sigs {
			_ = cmd.Process.Signal(sig)
		}
	}()
	if err := cmd.Wait(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() > 0 {
			return exit.ExitCode(), nil
		}
		return 1, err
	}
	return 0, nil
}
