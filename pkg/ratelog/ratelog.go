// Package ratelog holds Log, which logs an event that may repeat as fast as a peer likes (a
// refused call, a failed TLS handshake) in a bounded way: the first of a key as a warning, the
// next ones within an interval as debug lines, counted in the next warning of that key.
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/lru"
)

// Log logs events by key: the first of a key as a warning, the next ones within its interval
// as debug lines, and the first once the interval has passed as a warning again, with the
// number logged at debug level meanwhile ("unlogged"). It remembers a bounded number of keys:
// past it the least recently seen key is forgotten, and its next event is logged as a first
// one. It is safe for concurrent use.
type Log[K comparable] struct {
	log   *slog.Logger // nil: slog.Default() at each event
	every time.Duration

	// Now is the clock; time.Now unless a test sets it before the first event.
	Now func() time.Time

	mu   sync.Mutex
	seen *lru.Cache[K, *state]
}

// state is when a key was last logged at warning level and how many events were not since.
type state struct {
	logged   time.Time
	unlogged int
}

// New returns a Log writing to log (nil: slog.Default() at each event) that logs a key at
// warning level at most once per every, and remembers at most keys keys.
func New[K comparable](log *slog.Logger, every time.Duration, keys int) *Log[K] {
	return &Log[K]{log: log, every: every, Now: time.Now, seen: lru.New[K, *state](keys, nil)}
}

// Warn logs msg with attrs for an event of key: a warning, or a debug line when key was logged
// at warning level less than the interval ago.
func (l *Log[K]) Warn(ctx context.Context, key K, msg string, attrs ...any) {
	now := l.Now()
	l.mu.Lock()
	st, ok := l.seen.Get(key)
	quiet := ok && now.Sub(st.logged) < l.every
	unlogged := 0
	switch {
	case quiet:
		st.unlogged++
	case ok:
		unlogged, st.logged, st.unlogged = st.unlogged, now, 0
	default:
		l.seen.Put(key, &state{logged: now})
	}
	l.mu.Unlock()
	log := l.log
	if log == nil {
		log = slog.Default()
	}
	if quiet {
		log.DebugContext(ctx, msg, attrs...)
		return
	}
	if unlogged > 0 {
		attrs = append(attrs, "unlogged", unlogged)
	}
	log.WarnContext(ctx, msg, attrs...)
}
