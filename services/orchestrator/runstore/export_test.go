package runstore

import "time"

// SetWatchLinger sets how long the inputs' watch outlives the last run that watched, for the
// unsubscriptions that follow.
func SetWatchLinger(s *Store, d time.Duration) {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.hub.linger = d
}

// SetAwaitRecheck sets how often an Await reads the checkpoint it waits on again, whatever its
// watch delivered.
func SetAwaitRecheck(s *Store, d time.Duration) { s.awaitRecheck = d }
