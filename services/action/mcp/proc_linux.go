package mcp

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts the child in its own process group (a terminal's Ctrl-C reaches this
// process, which closes the child in order) and has the kernel kill it if this process dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// applyLimits sets the resource limits of process pid with prlimit(2), soft and hard alike,
// and disables its core dumps.
func applyLimits(pid int, l Limits) error {
	if err := setLimit(pid, "core file size", unix.RLIMIT_CORE, 0); err != nil {
		return err
	}
	for _, lim := range []struct {
		name     string
		resource int
		value    uint64
	}{
		{"address space", unix.RLIMIT_AS, l.AddressSpaceBytes},
		{"CPU time", unix.RLIMIT_CPU, l.CPUSeconds},
		{"open files", unix.RLIMIT_NOFILE, l.OpenFiles},
		{"file size", unix.RLIMIT_FSIZE, l.FileSizeBytes},
	} {
		if lim.value == 0 {
			continue
		}
		if err := setLimit(pid, lim.name, lim.resource, lim.value); err != nil {
			return err
		}
	}
	return nil
}

// setLimit sets one resource limit of process pid.
func setLimit(pid int, name string, resource int, value uint64) error {
	if err := unix.Prlimit(pid, resource, &unix.Rlimit{Cur: value, Max: value}, nil); err != nil {
		return fmt.Errorf("%s limit %d: %w", name, value, err)
	}
	return nil
}
