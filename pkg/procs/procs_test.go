package procs

import (
	"os"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

// recorded is a fitter whose changes to GOMAXPROCS are recorded instead of made, with the
// GOMAXPROCS it set (2 by default), read as the fitter's timer goroutine writes it.
func recorded() (f *fitter, procs func() int) {
	n := 2
	f = &fitter{quiet: Quiet, set: func(m int) int { n = m; return m }, reset: func() { n = 2 }}
	return f, func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		return n
	}
}

func TestOneProcessorWhileOneRunIsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, procs := recorded()
		f.start()
		if procs() != 1 {
			t.Fatalf("with nothing in flight GOMAXPROCS is %d, want 1", procs())
		}
		f.add(1)
		if procs() != 1 {
			t.Fatalf("with one run in flight GOMAXPROCS is %d, want 1", procs())
		}
		f.add(1)
		if procs() != 2 {
			t.Fatalf("with two runs in flight GOMAXPROCS is %d, want the default 2 at once", procs())
		}
		f.add(-1)
		time.Sleep(Quiet - time.Millisecond)
		synctest.Wait()
		if procs() != 2 {
			t.Fatalf("%v after the second run ended GOMAXPROCS is %d, want 2 until %v have passed", Quiet-time.Millisecond, procs(), Quiet)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if procs() != 1 {
			t.Fatalf("%v after the second run ended GOMAXPROCS is %d, want 1", Quiet, procs())
		}
		f.add(-1)
		f.stop()
		if procs() != 2 {
			t.Fatalf("after the last stop GOMAXPROCS is %d, want the default 2", procs())
		}
	})
}

func TestABurstKeepsTheCores(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, procs := recorded()
		f.start()
		defer f.stop()
		f.add(2)
		for range 5 { // runs that start within Quiet of the last one's end
			f.add(-1)
			time.Sleep(Quiet / 2)
			f.add(1)
			synctest.Wait()
			if procs() != 2 {
				t.Fatalf("a run starting %v after another ended found GOMAXPROCS %d, want 2", Quiet/2, procs())
			}
		}
		f.add(-1)
		f.add(1) // a timer that fired as a run started finds itself replaced: it narrows nothing
		f.add(-1)
		f.quieted(f.pending - 1)
		if procs() != 2 {
			t.Fatalf("a stale timer narrowed GOMAXPROCS to %d", procs())
		}
	})
}

func TestFitNests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, procs := recorded()
		f.start()
		f.start()
		f.stop()
		if procs() != 1 {
			t.Fatalf("with one Fit left GOMAXPROCS is %d, want 1", procs())
		}
		f.add(1)
		f.stop()
		if procs() != 2 {
			t.Fatalf("after the last stop GOMAXPROCS is %d, want the default 2", procs())
		}
		f.add(1) // counted, but nothing is fitted any more
		if procs() != 2 || f.inFlight != 2 {
			t.Fatalf("unfitted: GOMAXPROCS %d and %d in flight, want 2 and 2", procs(), f.inFlight)
		}
		f.add(-2)
		time.Sleep(2 * Quiet)
		synctest.Wait()
		if procs() != 2 {
			t.Fatalf("unfitted: GOMAXPROCS narrowed to %d", procs())
		}
	})
}

// TestFitSetsTheRuntimesProcessors is Fit and Add on the process itself.
func TestFitSetsTheRuntimesProcessors(t *testing.T) {
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		t.Skip("GOMAXPROCS is set in the environment")
	}
	def := runtime.GOMAXPROCS(0)
	if def < 2 {
		t.Skip("one CPU: there is nothing to fit")
	}
	fit.quiet = time.Millisecond
	t.Cleanup(func() { fit.quiet = Quiet })
	stop := Fit()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("fitted with nothing in flight: GOMAXPROCS %d, want 1", got)
	}
	Add(2)
	if got := runtime.GOMAXPROCS(0); got != def {
		t.Errorf("two runs in flight: GOMAXPROCS %d, want the default %d", got, def)
	}
	Add(-2)
	for deadline := time.Now().Add(10 * time.Second); runtime.GOMAXPROCS(0) != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("nothing in flight for 10s: GOMAXPROCS still %d, want 1", runtime.GOMAXPROCS(0))
		}
		runtime.Gosched()
	}
	stop()
	stop() // a second call changes nothing
	if got := runtime.GOMAXPROCS(0); got != def {
		t.Errorf("after stop: GOMAXPROCS %d, want the default %d", got, def)
	}
	if InFlight() != 0 {
		t.Errorf("InFlight = %d, want 0", InFlight())
	}
}

func TestFitLeavesAnOperatorsSetting(t *testing.T) {
	t.Setenv("GOMAXPROCS", "2")
	before := runtime.GOMAXPROCS(0)
	stop := Fit()
	defer stop()
	Add(1)
	defer Add(-1)
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("with GOMAXPROCS in the environment, Fit changed it from %d to %d", before, got)
	}
}
