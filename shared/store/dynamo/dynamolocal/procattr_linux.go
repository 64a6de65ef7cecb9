package dynamolocal

import (
	"os/exec"
	"syscall"
)

// setProcAttr asks Linux to kill the JVM when the test binary dies, so a
// test that times out or is killed does not leave DynamoDB Local running.
// (Pdeathsig fires when the creating OS thread exits; the Go runtime does not
// exit threads it did not lock, and the JVM is started from the TestMain
// goroutine, so in practice this means "when the process dies".)
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
