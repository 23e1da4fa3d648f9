package mcp

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts the child in its own process group (a terminal's Ctrl-C reaches this
// process, which closes the child in order) and has the kernel kill it if this process dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup kills what is left of the process group pgid: the processes a stopped server
// started. A group that is gone already is no error.
func killGroup(pgid int) {
	_ = unix.Kill(-pgid, unix.SIGKILL)
}

// watchLeader kills the process group pgid as soon as its leader, a stdio server, exits, so
// that processes it left behind, holding its stdin and stdout open, cannot keep its session
// from ending (and the server from being restarted). The returned channel is closed when it is
// done; at once when the kernel has no pidfd (before Linux 5.3), where nothing is watched.
func watchLeader(pgid int) <-chan struct{} {
	done := make(chan struct{})
	fd, err := unix.PidfdOpen(pgid, 0)
	if err != nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(fds, -1) // readable when the leader exits
			if err == unix.EINTR {
				continue
			}
			if err == nil {
				killGroup(pgid)
			}
			return
		}
	}()
	return done
}

// applyLimits sets the resource limits of process pid with prlimit(2), soft and hard alike,
// and disables its core dumps.
func applyLimits(pid int, l Limits) error {
	if err := setLimit(pid, "core file size", unix.RLIMIT_CORE, 0); err != nil {
		return err
	}
	processes := l.Processes
	if processes > 0 {
		running, err := userTasks(os.Getuid())
		if err != nil {
			return fmt.Errorf("counting the user's processes for the process limit: %w", err)
		}
		processes += running
	}
	for _, lim := range []struct {
		name     string
		resource int
		value    uint64
	}{
		{"address space", unix.RLIMIT_AS, l.AddressSpaceBytes},
		{"CPU time", unix.RLIMIT_CPU, l.CPUSeconds},
		{"process", unix.RLIMIT_NPROC, processes},
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

// userTasks counts the tasks (processes and threads) whose real user is uid, which is what
// the kernel compares with RLIMIT_NPROC. A process that ends while it is read is skipped.
func userTasks(uid int) (uint64, error) {
	statuses, err := filepath.Glob("/proc/[0-9]*/status")
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, path := range statuses {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		owner, threads, ok := uidAndThreads(raw)
		if ok && owner == uid {
			n += threads
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("no process of user %d found in /proc", uid)
	}
	return n, nil
}

// uidAndThreads reads the real user id and the thread count from a /proc/<pid>/status file.
func uidAndThreads(status []byte) (uid int, threads uint64, ok bool) {
	var gotUID, gotThreads bool
	for sc := bufio.NewScanner(bytes.NewReader(status)); sc.Scan(); {
		key, value, found := bytes.Cut(sc.Bytes(), []byte(":"))
		if !found {
			continue
		}
		fields := bytes.Fields(value)
		if len(fields) == 0 {
			continue
		}
		switch string(key) {
		case "Uid":
			v, err := strconv.Atoi(string(fields[0]))
			uid, gotUID = v, err == nil
		case "Threads":
			v, err := strconv.ParseUint(string(fields[0]), 10, 64)
			threads, gotThreads = v, err == nil
		}
	}
	return uid, threads, gotUID && gotThreads
}
