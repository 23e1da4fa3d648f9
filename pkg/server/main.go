package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"google.golang.org/grpc"
)

// FlushTimeout bounds the final export of spans when a process exits (Main, agentmesh dev):
// a collector that is down or does not answer delays the exit no longer.
const FlushTimeout = 5 * time.Second

// Registrar is a service that registers itself on a gRPC server or an in-process channel. A
// Registrar that also implements io.Closer is closed by Main after the server has drained; one
// that implements HealthSource has its health reported by the server (see Options.Health); one
// that implements Drainer is drained first, reported NOT_SERVING meanwhile.
type Registrar interface {
	Register(g grpc.ServiceRegistrar)
}

// WithDrainTimeout returns r with a drain timeout of its own: stopping, Main lets its calls in
// flight finish for up to d (and a Drainer's Drain run for up to d), where other services get
// DefaultDrainTimeout. DRAIN_TIMEOUT_MS, when set, takes the place of either.
func WithDrainTimeout(r Registrar, d time.Duration) Registrar {
	return draining{Registrar: r, timeout: d}
}

// DrainMargin is what a service's drain allows beyond the longest its calls may last
// (DrainFor): the time to record a call's outcome and answer it, as the orchestrator waits as
// much for an answer beyond a call's timeout.
const DrainMargin = 5 * time.Second

// DrainFor is the drain timeout (WithDrainTimeout) of a service whose calls may last up to d:
// d and DrainMargin.
func DrainFor(d time.Duration) time.Duration { return d + DrainMargin }

// drainTimer is a Registrar with a drain timeout of its own (WithDrainTimeout).
type drainTimer interface {
	DrainTimeout() time.Duration
}

type draining struct {
	Registrar
	timeout time.Duration
}

func (d draining) DrainTimeout() time.Duration { return d.timeout }

func (d draining) Unwrap() Registrar { return d.Registrar }

// LongCaller is a Registrar with unary methods whose calls may last as long as a run (the
// orchestrator's Run): Main holds them as it holds streams (Options.LongCalls), so that a
// revoked API key or client certificate ends them.
type LongCaller interface {
	// LongCalls are the full names of those methods ("/pkg.Service/Method").
	LongCalls() []string
}

// Drainer is a service with work of its own to wind down when the process is told to stop,
// before the server drains its RPCs: e.g. the orchestrator hands its runs off to other
// replicas, which ends the RPCs waiting on them. Drain gets a context that ends with the
// server's drain timeout.
type Drainer interface {
	Drain(ctx context.Context)
}

// Failer is a service that can fail for good while it serves: the memory stage whose schema
// upgrade, done in the background, cannot build a unique index over the rows stored. Main
// stops the server, as on SIGTERM, once Failed's channel yields an error, and exits with the
// error's exit code (exitcode.Of), 3 (exitcode.Unavailable) unless it carries one: the service
// could not start what it serves. A nil channel never fails.
type Failer interface {
	Failed() <-chan error
}

// Main runs a service binary and exits the process: it logs JSON to stderr, loads the
// configuration (the file AGENTMESH_CONFIG names, if any, over the standard layers of
// config.Load, with GRPC_MAX_MESSAGE_BYTES, when set, taking the place of
// grpc.max_message_bytes, and TLS_CA, TLS_CERT, TLS_KEY and TLS_CRL that of tls.ca, tls.cert,
// tls.key and tls.crl), sets up tracing for "agentmesh-"+name, serves the process's metrics as
// Prometheus text on METRICS_ADDR (path /metrics; none when it is unset), builds the service
// with the configuration, serves it on LISTEN_ADDR (else defaultAddr) until SIGINT or SIGTERM
// (or a Failer's failure), then drains (for up to DRAIN_TIMEOUT_MS milliseconds when set, else
// the service's own drain timeout, WithDrainTimeout, else DefaultDrainTimeout) and flushes the
// spans. The server accepts messages of up to grpc.max_message_bytes.
// The Go runtime's memory limit follows the container's (LimitMemory). An invalid configuration
// (LISTEN_ADDR and METRICS_ADDR included: host:port, a port from 0 to 65535; DRAIN_TIMEOUT_MS
// too) exits 4; a build error exits with its exitcode.Of code (1 unless it carries one); a listen
// failure (gRPC or metrics) exits 3.
//
// With tls.ca, tls.cert and tls.key the server speaks mutual TLS between services and takes
// calls only from mesh identities (Options.Mesh; README, "mTLS between services"). A server
// that other hosts can reach without authenticating its callers refuses to start (exit 4)
// unless the binary runs insecure (Insecure), and so does a public API they can reach that
// takes API keys without TLS, unless auth.allow_plaintext_keys (CheckPlaintextKeys).
//
// Started with the argument HealthCommand, the binary checks the health of the server it
// would run instead, and exits 0 when it serves (see probe). With -h, --help or help it prints
// its usage and exits 0; with any other argument but --insecure it exits 4.
func Main(name, defaultAddr string, build func(ctx context.Context, cfg *config.Config) (Registrar, error)) {
	os.Exit(run(name, defaultAddr, false, os.Args[1:], build))
}

// MainPublic is Main for the mesh's public API, whose callers authenticate as the auth section
// of the configuration says, over TLS with tls.cert and tls.key (TLS_CERT and TLS_KEY override
// them); the orchestrator presents the same certificate to the stages it calls.
func MainPublic(name, defaultAddr string, build func(ctx context.Context, cfg *config.Config) (Registrar, error)) {
	os.Exit(run(name, defaultAddr, true, os.Args[1:], build))
}

// usage is a service binary's help, with its name three times and its default address.
const usage = `usage: %s [--insecure]   serve the %s service until SIGINT or SIGTERM
       %s health       check the health of the server it would run (exit 0 when it serves)
LISTEN_ADDR is its address (default %s), AGENTMESH_CONFIG its configuration file; README,
"Running the services separately", lists every variable it reads.
`

// run is Main without the exit; args are the command line's arguments.
func run(name, defaultAddr string, public bool, args []string, build func(ctx context.Context, cfg *config.Config) (Registrar, error)) int {
	switch {
	case slices.Equal(args, []string{HealthCommand}):
		return probe(defaultAddr, public, os.Stderr)
	case slices.Equal(args, []string{"-h"}), slices.Equal(args, []string{"--help"}), slices.Equal(args, []string{"help"}):
		fmt.Fprintf(os.Stdout, usage, name, name, name, defaultAddr)
		return exitcode.OK
	case len(args) > 0 && !slices.Equal(args, []string{"--insecure"}):
		// Served anyway, a mistyped `health` in a healthcheck started a second server.
		fmt.Fprintf(os.Stderr, "%s: unknown arguments %q\n"+usage, name, args, name, name, name, defaultAddr)
		return exitcode.Invalid
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("service", name)
	slog.SetDefault(log)

	if _, err := LimitMemory(log); err != nil {
		log.Error("memory limit", "err", err)
		return exitcode.Of(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg, err := loadConfig()
	if err != nil {
		log.Error("configuration", "err", err)
		return exitcode.Invalid
	}
	opts := Options{Name: name, Addr: Env("LISTEN_ADDR", defaultAddr), Logger: log, MaxMessageBytes: cfg.GRPC.MaxMessageBytes}
	for _, a := range []struct{ env, addr string }{{"LISTEN_ADDR", opts.Addr}, {"METRICS_ADDR", os.Getenv("METRICS_ADDR")}} {
		if err := config.CheckAddress(a.addr); a.addr != "" && err != nil {
			log.Error("configuration", "err", fmt.Errorf("%s: %w", a.env, err))
			return exitcode.Invalid // not unavailable (3), as an address in use is
		}
	}
	drain, err := drainTimeout()
	if err != nil {
		log.Error("configuration", "err", err)
		return exitcode.Invalid
	}
	if err := secure(&opts, public, cfg, log); err != nil {
		log.Error("security", "err", err)
		return exitcode.Of(err)
	}
	tp, flush, err := telemetry.Setup(ctx, "agentmesh-"+name)
	if err != nil {
		log.Error("tracing configuration", "err", err)
		return exitcode.Invalid
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), FlushTimeout)
		defer cancel()
		if err := flush(fctx); err != nil {
			log.Warn("flushing spans", "err", err)
		}
	}()

	mp, stopMetrics, err := serveMetrics(name, log)
	if err != nil {
		log.Error("metrics", "err", err)
		return exitcode.Of(err) // telemetry.ServeMetrics says which
	}
	defer stopMetrics()

	svc, err := build(ctx, cfg)
	if err != nil {
		log.Error("starting service", "err", err)
		return exitcode.Of(err)
	}
	if c, ok := closerOf(svc); ok {
		defer func() {
			if err := c.Close(); err != nil {
				log.Warn("closing service", "err", err)
			}
		}()
	}

	if drain == 0 {
		drain = DefaultDrainTimeout
		if d, ok := as[drainTimer](svc); ok {
			drain = d.DrainTimeout()
		}
	}
	opts.TracerProvider, opts.MeterProvider, opts.Health, opts.DrainTimeout = tp, mp, healthOf(svc), drain
	if l, ok := as[LongCaller](svc); ok {
		opts.LongCalls = l.LongCalls()
	}
	srv := New(opts)
	svc.Register(srv.GRPC())
	if err := srv.Start(); err != nil {
		log.Error("listening", "err", err)
		return exitcode.Unavailable
	}
	var failed <-chan error
	if f, ok := as[Failer](svc); ok {
		failed = f.Failed()
	}
	var failure error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case <-srv.served:
	case failure = <-failed:
		log.Error("the service failed: shutting down", "err", failure)
	}
	stop() // a second signal now ends the process at once
	if d, ok := as[Drainer](svc); ok {
		srv.health.Shutdown() // load balancers move away while the service winds down
		dctx, cancel := context.WithTimeout(context.Background(), drain)
		d.Drain(dctx)
		cancel()
	}
	srv.Shutdown(context.Background())
	if err := srv.serveErr(); err != nil {
		log.Error("serving", "err", err)
		return exitcode.Failed
	}
	if failure != nil {
		return exitcode.Of(exitcode.Default(exitcode.Unavailable, failure))
	}
	return exitcode.OK
}

// loadConfig loads the configuration of a service binary, as Main says.
func loadConfig() (*config.Config, error) {
	cfg, err := config.Load(os.Getenv("AGENTMESH_CONFIG"))
	if err != nil {
		return nil, err
	}
	if t := (config.TLS{CA: Env("TLS_CA", cfg.TLS.CA), Cert: Env("TLS_CERT", cfg.TLS.Cert), Key: Env("TLS_KEY", cfg.TLS.Key),
		CRL: Env("TLS_CRL", cfg.TLS.CRL)}); t != cfg.TLS {
		cfg.TLS = t
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("TLS_CA, TLS_CERT, TLS_KEY, TLS_CRL: %w", err)
		}
	}
	if v := os.Getenv("GRPC_MAX_MESSAGE_BYTES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("%w: GRPC_MAX_MESSAGE_BYTES: %q is not a number of bytes", config.ErrInvalid, v)
		}
		cfg.GRPC.MaxMessageBytes = n
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("GRPC_MAX_MESSAGE_BYTES: %w", err)
		}
	}
	return cfg, nil
}

// drainTimeout returns the drain timeout DRAIN_TIMEOUT_MS sets, in milliseconds: 0 when it is
// unset, and an error wrapping config.ErrInvalid unless it is a positive number of
// milliseconds of at most a day.
func drainTimeout() (time.Duration, error) {
	v := os.Getenv("DRAIN_TIMEOUT_MS")
	if v == "" {
		return 0, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 1 || ms > maxDrainTimeout.Milliseconds() {
		return 0, fmt.Errorf("%w: DRAIN_TIMEOUT_MS: %q is not a number of milliseconds from 1 to %d", config.ErrInvalid, v, maxDrainTimeout.Milliseconds())
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// maxDrainTimeout bounds DRAIN_TIMEOUT_MS: no process waits longer than a day to stop.
const maxDrainTimeout = 24 * time.Hour

// Env returns the value of the environment variable key, or def when it is unset or empty.
func Env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// WithClose returns r with an extra cleanup: Main runs close after the server has drained
// (after r's own Close, when r, or a Registrar it wraps, is an io.Closer).
func WithClose(r Registrar, close func() error) Registrar {
	return closing{Registrar: r, close: close}
}

type closing struct {
	Registrar
	close func() error
}

func (c closing) Close() error {
	var err error
	if closer, ok := closerOf(c.Registrar); ok {
		err = closer.Close()
	}
	return errors.Join(err, c.close())
}

func (c closing) Unwrap() Registrar { return c.Registrar }
