package events

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// waitTimeout bounds every wait for something the test expects to happen.
const waitTimeout = 30 * time.Second

// restartable is an embedded NATS server on a fixed loopback port that a test stops and
// starts again, as an operator restarts NATS.
type restartable struct {
	t    *testing.T
	port int
	srv  *Embedded
}

// startRestartable starts a server on a free port with its store in dir: one below the
// kernel's ephemeral range (grpctest.FreePort), so that no connection takes it while the
// server is down.
func startRestartable(t *testing.T, dir string) *restartable {
	t.Helper()
	r := &restartable{t: t, port: grpctest.FreePort(t)}
	r.start(dir)
	t.Cleanup(func() {
		if r.srv != nil {
			r.srv.Shutdown()
		}
	})
	return r
}

// start starts the server on its port with its store in dir.
func (r *restartable) start(dir string) {
	r.t.Helper()
	srv, err := StartEmbedded(EmbeddedOptions{StoreDir: dir, Port: r.port})
	if err != nil {
		r.t.Fatalf("StartEmbedded: %v", err)
	}
	r.srv = srv
}

// stop shuts the server down.
func (r *restartable) stop() {
	r.srv.Shutdown()
	r.srv = nil
}

// connect connects to r with Connect, reconnecting every few milliseconds; failed counts the
// failed reconnection attempts.
func (r *restartable) connect(failed *atomic.Int64) *nats.Conn {
	r.t.Helper()
	nc, err := Connect(r.srv.ClientURL(), "events-test",
		nats.ReconnectWait(5*time.Millisecond), nats.ReconnectJitter(0, 0),
		nats.ReconnectErrHandler(func(*nats.Conn, error) { failed.Add(1) }))
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(nc.Close)
	return nc
}

// fastPublisher returns a Publisher on nc that retries and probes within milliseconds.
func fastPublisher(t *testing.T, nc *nats.Conn, opts ...Option) *Publisher {
	t.Helper()
	pub, err := NewPublisher(t.Context(), nc, append(opts, func(p *Publisher) {
		p.retry = backoff{initial: time.Millisecond, ceiling: 20 * time.Millisecond}
	})...)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	return pub
}

// waitReady waits until pub.Ready reports want.
func waitReady(t *testing.T, pub *Publisher, want bool) {
	t.Helper()
	timeout := time.NewTimer(waitTimeout)
	defer timeout.Stop()
	for {
		ready, changed := pub.Ready()
		if ready == want {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("Ready() stayed %v for %s", ready, waitTimeout)
		}
	}
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", waitTimeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// watchInBackground watches a run until run_finished (for at most waitTimeout) and delivers
// what it saw. It returns once the first event has arrived.
func watchInBackground(t *testing.T, pub *Publisher, runID string) <-chan []*eventv1.RunEvent {
	t.Helper()
	seen := make(chan []*eventv1.RunEvent, 1)
	started := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
		defer cancel()
		var got []*eventv1.RunEvent
		err := Watch(ctx, pub.JetStream(), runID, 0, func(_ context.Context, ev *eventv1.RunEvent) error {
			if got = append(got, ev); len(got) == 1 {
				close(started)
			}
			return nil
		})
		if err != nil {
			t.Errorf("Watch: %v", err)
		}
		seen <- got
	}()
	select {
	case <-started:
	case got := <-seen:
		t.Fatalf("Watch ended before its first event, with %v", got)
	}
	return seen
}

// emitted is what an Emit returned.
type emitted struct {
	ev  *eventv1.RunEvent
	err error
}

func TestEmitWaitsOutANATSRestart(t *testing.T) {
	dir := t.TempDir()
	srv := startRestartable(t, dir)
	var failedReconnects atomic.Int64
	nc := srv.connect(&failedReconnects)
	pub := fastPublisher(t, nc)
	rs := pub.Run("run-outage")
	before := emitAll(t, rs, runStarted("go"), turnStarted(1))
	watched := watchInBackground(t, pub, "run-outage")

	srv.stop()
	waitReady(t, pub, false)
	done := make(chan emitted, 1)
	go func() {
		ev, err := rs.Emit(t.Context(), toolFinished("search"))
		done <- emitted{ev, err}
	}()
	// Longer than nats.go's default 60 reconnection attempts, after which (2 minutes at its
	// default 2 s wait) a plain connection closes for good.
	waitFor(t, "more than 60 failed reconnection attempts", func() bool { return failedReconnects.Load() > 60 })
	select {
	case e := <-done:
		t.Fatalf("Emit returned during the outage: %v, %v", e.ev, e.err)
	default:
	}
	if got := rs.Seq(); got != 2 { // and Seq does not wait for the blocked Emit
		t.Errorf("Seq() during the outage = %d, want 2", got)
	}

	srv.start(dir)
	var e emitted
	select {
	case e = <-done:
	case <-time.After(waitTimeout):
		t.Fatalf("Emit still blocked %s after NATS came back", waitTimeout)
	}
	if e.err != nil || e.ev.GetSeq() != 3 {
		t.Fatalf("Emit across the outage = seq %d, %v; want seq 3", e.ev.GetSeq(), e.err)
	}
	last := emitAll(t, rs, runFinished())
	waitReady(t, pub, true)

	want := slices.Concat(before, []*eventv1.RunEvent{e.ev}, last)
	assertEvents(t, <-watched, want)
	if got := storedSeqs(t, pub.JetStream(), "run-outage"); !slices.Equal(got, []uint64{1, 2, 3, 4}) {
		t.Errorf("stored seqs %v, want [1 2 3 4]", got)
	}
}

func TestStreamCreatedAgainWhenNATSRestartsWithAnEmptyStore(t *testing.T) {
	srv := startRestartable(t, t.TempDir())
	var failedReconnects atomic.Int64
	nc := srv.connect(&failedReconnects)
	opts := StreamOptions{MaxAge: time.Hour, MaxBytes: 64 << 20}
	pub := fastPublisher(t, nc, WithStream(opts))
	rs := pub.Run("run-empty")
	emitAll(t, rs, runStarted("go"), turnStarted(1))

	srv.stop()
	waitReady(t, pub, false)
	srv.start(t.TempDir())
	// Ready again without a publish: the probe created the stream.
	waitReady(t, pub, true)
	s, err := pub.JetStream().Stream(t.Context(), StreamName)
	if err != nil {
		t.Fatalf("the stream was not created again: %v", err)
	}
	if cfg := s.CachedInfo().Config; cfg.MaxAge != opts.MaxAge || cfg.MaxBytes != opts.MaxBytes {
		t.Errorf("stream created again with max age %v, max bytes %d; want the Publisher's %v, %d", cfg.MaxAge, cfg.MaxBytes, opts.MaxAge, opts.MaxBytes)
	}

	last := emitAll(t, rs, runFinished())
	if last[0].GetSeq() != 3 {
		t.Errorf("run_finished got seq %d, want 3", last[0].GetSeq())
	}
	var watched []*eventv1.RunEvent
	collect := func(_ context.Context, ev *eventv1.RunEvent) error {
		watched = append(watched, ev)
		return nil
	}
	// The run's start went with the store: a watch from it is told so, and where to watch from.
	err = Watch(t.Context(), pub.JetStream(), "run-empty", 0, collect)
	if !errors.Is(err, stageerr.ErrFailedPrecondition) ||
		!strings.Contains(err.Error(), "from_seq 2") || len(watched) != 0 {
		t.Fatalf("Watch from 0 = %v after %d events; want FAILED_PRECONDITION naming from_seq 2",
			err, len(watched))
	}
	if err := Watch(t.Context(), pub.JetStream(), "run-empty", 2, collect); err != nil {
		t.Fatalf("Watch from 2: %v", err)
	}
	assertEvents(t, watched, last)
}

func TestWatchFollowsTheStreamCreatedAgainWhenNATSLosesItsStore(t *testing.T) {
	srv := startRestartable(t, t.TempDir())
	var failedReconnects atomic.Int64
	nc := srv.connect(&failedReconnects)
	pub := fastPublisher(t, nc)
	rs := pub.Run("run-lost")
	before := emitAll(t, rs, runStarted("go"), turnStarted(1))
	// Watch's own connection, as a WatchRun on another replica has.
	watcher := srv.connect(&failedReconnects)
	watchPub := fastPublisher(t, watcher)
	watched := watchInBackground(t, watchPub, "run-lost")

	srv.stop()
	waitReady(t, pub, false)
	srv.start(t.TempDir())
	waitReady(t, pub, true)
	after := emitAll(t, rs, turnStarted(2), runFinished())

	// The events stored before NATS lost its store were delivered before; the watch goes on
	// with the new stream's.
	assertEvents(t, <-watched, slices.Concat(before, after))
}

// attempts counts the log records of failed attempts to publish a run event.
type attempts struct{ n atomic.Int64 }

func (a *attempts) Enabled(context.Context, slog.Level) bool { return true }
func (a *attempts) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "publishing run event failed; retrying" {
		a.n.Add(1)
	}
	return nil
}
func (a *attempts) WithAttrs([]slog.Attr) slog.Handler { return a }
func (a *attempts) WithGroup(string) slog.Handler      { return a }

// TestEmitWaitsOutItsBackoffWhenJetStreamRefuses: an event that JetStream refuses at once (a
// sealed stream here; a full disk or an account over its quota in production) while the
// stream still answers is retried after its backoff. The stream's probe made events look
// storable again right after each refusal, which woke the retry at once: hundreds of attempts
// a second for every run emitting, each logged, against a NATS already in trouble.
func TestEmitWaitsOutItsBackoffWhenJetStreamRefuses(t *testing.T) {
	env := newTestEnv(t)
	s, err := env.js.Stream(t.Context(), StreamName)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.Sealed = true
	if _, err := env.js.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	env.pub.retry = backoff{initial: 200 * time.Millisecond, ceiling: time.Minute}
	logged := &attempts{}
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(logged))

	// Within a second the backoff allows attempts at 0, 0.2 and 0.6 s.
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, err := env.pub.Run("sealed").Emit(ctx, runStarted("refused")); err == nil {
		t.Fatal("Emit to a sealed stream succeeded")
	}
	if n := logged.n.Load(); n > 6 {
		t.Errorf("Emit made %d attempts in a second; its backoff allows 3", n)
	}
}
