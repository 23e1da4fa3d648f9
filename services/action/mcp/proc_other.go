//go:build !linux

package mcp

import (
	"errors"
	"syscall"
)

// sysProcAttr has no attributes to set outside Linux.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// killGroup does nothing: outside Linux a server does not get a process group of its own.
func killGroup(int) {}

// watchLeader watches nothing outside Linux: it returns a closed channel.
func watchLeader(int) <-chan struct{} {
	done := make(chan struct{})
	close(done)
	return done
}

// applyLimits refuses limits, which are only enforced on Linux.
func applyLimits(_ int, l Limits) error {
	if l != (Limits{}) {
		return errors.New("resource limits are only enforced on Linux")
	}
	return nil
}
