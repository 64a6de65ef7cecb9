//go:build !linux

package dynamolocal

import "os/exec"

// setProcAttr does nothing where there is no parent-death signal; Stop (via
// Main) still ends the JVM on a normal exit.
func setProcAttr(*exec.Cmd) {}
