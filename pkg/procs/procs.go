// Package procs fits the Go runtime's processors (GOMAXPROCS) to the work in flight in a
// process that runs the whole mesh.
//
// One run is a chain: each step of a turn hands its work from goroutine to goroutine (a gRPC
// call's caller, its writer, the server's reader and handler and back; a JetStream publish,
// the server's store, the acknowledgement), and one of them works at a time. With two or more
// processors the runtime wakes an idle thread for nearly every goroutine it makes runnable, and
// the work moves to the other core; on a machine where waking a thread is a system call and an
// interrupt between cores, that costs a lone run more than the second core gives it. With the
// whole mesh in one process on two cores, one run at a time, a turn took about a third less
// time and CPU with one processor than with two; with 256 runs at once, one processor did
// two thirds of the turns two did. So while at most one run is in flight the process has one
// processor, and the runtime's default (the machine's CPUs, or its container's CPU limit) from
// the moment a second one starts.
//
// The Go runtime has no setting that does this, and the libraries that set GOMAXPROCS follow
// the container's CPU limit, as the runtime itself now does, not the load; hence this package.
// GOMAXPROCS is one per process, so the count of work in flight is too.
package procs

import (
	"os"
	"runtime"
	"sync"
	"time"
)

// Quiet is how long at most one unit of work must have been in flight before the process
// goes back to one processor: a burst's runs that start one after another keep the cores.
const Quiet = time.Second

// fit is the process's state: how many units are in flight, and whether GOMAXPROCS is fitted.
var fit = fitter{quiet: Quiet, set: runtime.GOMAXPROCS, reset: runtime.SetDefaultGOMAXPROCS}

// fitter holds the work in flight and the processors it was given.
type fitter struct {
	quiet time.Duration
	set   func(int) int // runtime.GOMAXPROCS
	reset func()        // runtime.SetDefaultGOMAXPROCS

	mu       sync.Mutex
	users    int         // calls of Fit not yet stopped
	inFlight int         // units of work in flight (Add)
	narrow   bool        // GOMAXPROCS is 1 by this package's doing
	timer    *time.Timer // narrows the process after Quiet; nil when not pending
	pending  uint64      // counts the timers made, so that one stopped too late knows it is stale
}

// Fit makes GOMAXPROCS follow the work in flight that Add counts until stop is called: one
// processor while at most one unit is in flight, the runtime's default from the moment a
// second one starts, and one again once at most one has been in flight for Quiet. Calls nest;
// the last stop gives the runtime its default back. When the GOMAXPROCS environment variable
// is set, Fit leaves the processors as the operator set them.
func Fit() (stop func()) {
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return func() {}
	}
	fit.start()
	var once sync.Once
	return func() { once.Do(fit.stop) }
}

// Add counts delta units of work that start (delta > 0) or end (delta < 0) in this process; a
// unit is one run executing on an orchestrator. It changes GOMAXPROCS only while Fit is in
// effect.
func Add(delta int) { fit.add(delta) }

// InFlight is the work in flight in this process, as Add counted it.
func InFlight() int {
	fit.mu.Lock()
	defer fit.mu.Unlock()
	return fit.inFlight
}

func (f *fitter) start() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.users++
	if f.users == 1 && f.inFlight <= 1 {
		f.narrowLocked()
	}
}

func (f *fitter) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.users--
	if f.users == 0 {
		f.widenLocked()
	}
}

func (f *fitter) add(delta int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inFlight += delta
	switch {
	case f.users == 0:
	case f.inFlight > 1:
		f.widenLocked()
	case !f.narrow && f.timer == nil:
		f.pending++
		n := f.pending
		f.timer = time.AfterFunc(f.quiet, func() { f.quieted(n) })
	}
}

// quieted narrows the process once Quiet has passed since work in flight fell to one, unless
// more came in the meantime: widening stopped timer n, or replaced it if it fired too late.
func (f *fitter) quieted(n uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.timer == nil || n != f.pending {
		return
	}
	f.timer = nil
	if f.users > 0 && f.inFlight <= 1 {
		f.narrowLocked()
	}
}

func (f *fitter) narrowLocked() {
	if !f.narrow {
		f.set(1)
		f.narrow = true
	}
}

// widenLocked gives the runtime its default processors back and forgets a pending narrowing.
func (f *fitter) widenLocked() {
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	if f.narrow {
		f.reset()
		f.narrow = false
	}
}
