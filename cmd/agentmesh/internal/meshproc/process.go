package meshproc

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// exitTimeout bounds how long Kill, Stop and Wait wait for a process to exit; it is longer
// than any service's drain (pkg/server.DefaultDrainTimeout; the action stage's,
// action.DrainTimeout, is the default tool timeout and 5 s; the generation stage's,
// generation.DrainTimeout, the default step timeout and 5 s).
const exitTimeout = 3 * time.Minute

// Process is one process of a mesh — the NATS server, a stage or an orchestrator replica — that
// a test kills with real signals and starts again with the same command line and environment.
// Its output, across restarts, is printed when the test fails. Its methods are safe for
// concurrent use.
type Process struct {
	name string
	path string
	args []string
	env  []string
	dir  string
	logs LogBuffer

	mu      sync.Mutex
	current *execution
	starts  int
}

// execution is one start of a process.
type execution struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	err  error         // what Wait returned; set before done is closed
}

// newProcess returns a process that is not started yet. When the test ends, the process is
// killed if it still runs, and its output is printed if the test failed.
func newProcess(t testing.TB, name, path, dir string, args, env []string) *Process {
	p := &Process{name: name, path: path, args: args, env: env, dir: dir}
	t.Cleanup(func() {
		if p.Running() {
			p.Kill(t)
		}
		if t.Failed() {
			t.Logf("output of %s:\n%s", p.name, p.Logs())
		}
	})
	return p
}

// Name returns the process's name in the mesh ("nats", "intent", "a", ...).
func (p *Process) Name() string { return p.name }

// Start starts the process. It fails t when the process is already running or cannot start.
func (p *Process) Start(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.current != nil && !exited(p.current) {
		t.Fatalf("%s is already running (pid %d)", p.name, p.current.cmd.Process.Pid)
	}
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = p.env
	cmd.Dir = p.dir
	cmd.Stdout, cmd.Stderr = &p.logs, &p.logs
	cmd.WaitDelay = time.Second // do not wait for output copying once the process is gone
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	p.starts++
	p.logs.note("start %d of %s, pid %d", p.starts, p.name, cmd.Process.Pid)
	e := &execution{cmd: cmd, done: make(chan struct{})}
	p.current = e
	go func() {
		e.err = cmd.Wait()
		p.logs.note("%s (pid %d) exited: %v", p.name, cmd.Process.Pid, exitText(e.err))
		close(e.done)
	}()
}

// Running reports whether the process was started and has not exited.
func (p *Process) Running() bool {
	e := p.execution()
	return e != nil && !exited(e)
}

// Exited returns a channel closed when the process last started exits. It fails t before the
// first start.
func (p *Process) Exited(t testing.TB) <-chan struct{} {
	t.Helper()
	return p.started(t).done
}

// Signal sends sig to the running process, e.g. syscall.SIGSTOP and syscall.SIGCONT to freeze
// and thaw it.
func (p *Process) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := p.started(t).cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %s to %s: %v", sig, p.name, err)
	}
}

// Kill sends SIGKILL and waits until the process has exited.
func (p *Process) Kill(t testing.TB) {
	t.Helper()
	p.Signal(t, syscall.SIGKILL)
	p.wait(t)
}

// Stop sends SIGTERM, waits until the process has exited and returns its exit error: nil when it
// exited with status 0.
func (p *Process) Stop(t testing.TB) error {
	t.Helper()
	p.Signal(t, syscall.SIGTERM)
	return p.wait(t)
}

// Wait waits until the process last started has exited, as after a signal the test sent with
// Signal, and returns its exit error: nil when it exited with status 0.
func (p *Process) Wait(t testing.TB) error {
	t.Helper()
	return p.wait(t)
}

// Logs returns everything the process wrote to stdout and stderr, across restarts.
func (p *Process) Logs() string { return p.logs.String() }

// wait waits up to exitTimeout for the process last started to exit and returns its exit
// error.
func (p *Process) wait(t testing.TB) error {
	t.Helper()
	e := p.started(t)
	timer := time.NewTimer(exitTimeout)
	defer timer.Stop()
	select {
	case <-e.done:
		return e.err
	case <-timer.C:
		t.Fatalf("%s (pid %d) did not exit within %s", p.name, e.cmd.Process.Pid, exitTimeout)
		return nil
	}
}

// execution returns the last start, or nil.
func (p *Process) execution() *execution {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.current
}

// started returns the last start; it fails t before the first.
func (p *Process) started(t testing.TB) *execution {
	t.Helper()
	e := p.execution()
	if e == nil {
		t.Fatalf("%s was never started", p.name)
	}
	return e
}

// exited reports whether the execution's process has exited.
func exited(e *execution) bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// exitText describes how a process ended.
func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return fmt.Sprint(err)
}
