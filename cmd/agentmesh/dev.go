package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/server"
)

// devCommand runs the whole mesh in this process. With --run it makes one run end to end
// through the public API and exits with the run's exit code; otherwise it serves until
// interrupted.
func devCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	configPath := fs.String("config", os.Getenv("AGENTMESH_CONFIG"),
		"configuration file (highest layer; default $AGENTMESH_CONFIG, as the services read it)")
	message := fs.String("run", "", "make one run with this message, print the answer and exit")
	verbose := fs.Bool("v", false, "log every service's activity")
	replicas := fs.Int("orchestrators", 1, "orchestrator replicas sharing the runs (any of them serves, resumes and finishes any run)")
	insecure := fs.Bool("insecure", false, "let the mesh listen on addresses other hosts can reach without authentication")
	metricsAddr := fs.String("metrics-addr", os.Getenv("METRICS_ADDR"), "serve every service's Prometheus metrics on this address, path /metrics (default $METRICS_ADDR; none when empty)")
	metricsWebConfig := fs.String("metrics-web-config", os.Getenv("METRICS_WEB_CONFIG"), "Prometheus web configuration of the metrics listener: TLS, basic authentication (default $METRICS_WEB_CONFIG; plain HTTP when empty)")
	dataDir := fs.String("data", "", "where the embedded NATS keeps runs, so a restarted dev resumes them (default $XDG_STATE_HOME/agentmesh/nats, else ~/.local/state/agentmesh/nats; --run uses a temporary one)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("dev takes no arguments (got %q); did you mean --run?", fs.Args()))
	}
	if *replicas < 1 || *replicas > 9 {
		return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("--orchestrators must be between 1 and 9, got %d", *replicas))
	}
	if *message != "" && flagSet(fs, "data") { // the directory named was ignored
		return exitcode.Wrap(exitcode.Invalid,
			errors.New("--data does not go with --run, whose run uses a temporary store"))
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if _, err := server.LimitMemory(logger); err != nil {
		return err
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		if errors.Is(err, config.ErrInvalid) {
			return exitcode.Wrap(exitcode.Invalid, err)
		}
		return err
	}
	providers, flush, err := devTracing(ctx)
	if err != nil {
		return exitcode.Wrap(exitcode.Invalid, err)
	}
	defer func() { // as long as the service binaries flush theirs, whatever the collector does
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), server.FlushTimeout)
		defer cancel()
		flush(fctx)
	}()
	if flagSet(fs, "data") && (cfg.NATS.URL != "" || cfg.NATS.StoreDir != "") {
		return exitcode.Wrap(exitcode.Invalid, errors.New("--data does not go with nats.url or "+
			"nats.store_dir in the configuration, which say where the runs are kept"))
	}
	storeDir := ""
	if *message == "" && cfg.NATS.URL == "" && cfg.NATS.StoreDir == "" {
		if storeDir, err = devDataDir(*dataDir); err != nil {
			return err
		}
	}
	m, err := mesh.Start(ctx, mesh.Options{
		Config:           cfg,
		Ephemeral:        *message != "",
		StoreDir:         storeDir,
		Orchestrators:    *replicas,
		Insecure:         *insecure,
		MetricsAddr:      *metricsAddr,
		MetricsWebConfig: *metricsWebConfig,
		TracerProvider:   providers,
		Logger:           logger,
	})
	if err != nil {
		return err
	}
	defer m.Close()
	fmt.Fprintln(stderr, "agentmesh dev: the mesh is up")
	for _, name := range m.Services() {
		fmt.Fprintf(stderr, "  %-12s %s\n", name, m.Addr(name))
	}
	for i, a := range m.OrchestratorAddrs()[1:] {
		fmt.Fprintf(stderr, "  %-12s %s (replica %d)\n", mesh.Orchestrator, a, i+2)
	}
	if u := m.NATSURL(); u != "" {
		fmt.Fprintf(stderr, "  %-12s %s (embedded, JetStream)\n", "nats", u)
	}
	if storeDir != "" {
		fmt.Fprintf(stderr, "  %-12s %s (runs survive a restart of dev)\n", "data", storeDir)
	}
	if a := m.MetricsAddr(); a != "" {
		if *metricsWebConfig == "" {
			fmt.Fprintf(stderr, "  %-12s http://%s/metrics (Prometheus)\n", "metrics", a)
		} else {
			fmt.Fprintf(stderr, "  %-12s %s/metrics (Prometheus, served as %s configures it)\n", "metrics", a, *metricsWebConfig)
		}
	}
	if !m.Authenticated {
		fmt.Fprintln(stderr, "the public API takes calls without authentication; configure auth in agentmesh.yaml to require API keys or client certificates (README, \"Security\")")
	}
	// A service that fails for good stops the mesh as SIGTERM does (m.Close, deferred), and
	// dev exits with its error, as the service's binary does (server.Main).
	ctx, failure, stopWatching := untilFailed(ctx, m.Failed())
	defer stopWatching()
	addr := m.Addr(mesh.Orchestrator)
	if *message == "" {
		fmt.Fprintf(stderr, "run an agent with: agentmesh run --addr %s \"What is 6 times 7?\" (Ctrl-C stops the mesh)\n", addr)
		<-ctx.Done()
		return failed(logger, failure())
	}
	client, closeConn, err := connect(addr)
	if err != nil {
		return err
	}
	defer closeConn()
	req := &agentv1.RunRequest{Message: *message}
	if !authenticated() {
		req.UserId = "cli"
	}
	err = streamRun(ctx, client, addr, req, false, stdout, stderr)
	if f := failure(); f != nil {
		return failed(logger, f)
	}
	return err
}

// devDataDir is where `agentmesh dev` keeps its embedded NATS data: dir, or
// $XDG_STATE_HOME/agentmesh/nats, or ~/.local/state/agentmesh/nats. It is created if needed;
// one that cannot be is an invalid argument (exit 4), as is no home to put it in.
func devDataDir(dir string) (string, error) {
	if dir == "" {
		state := os.Getenv("XDG_STATE_HOME")
		if state == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", exitcode.Wrap(exitcode.Invalid, fmt.Errorf("no data directory: %w; pass --data DIR", err))
			}
			state = filepath.Join(home, ".local", "state")
		}
		dir = filepath.Join(state, "agentmesh", "nats")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", exitcode.Wrap(exitcode.Invalid, fmt.Errorf("data directory (--data): %w", err))
	}
	return dir, nil
}
