package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
)

// devCommand runs the whole mesh in this process. With --run it makes one run end to end
// through the public API and exits with the run's exit code; otherwise it serves until
// interrupted.
func devCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	configPath := fs.String("config", "", "configuration file (highest layer)")
	message := fs.String("run", "", "make one run with this message, print the answer and exit")
	verbose := fs.Bool("v", false, "log every service's activity")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("dev takes no arguments (got %q); did you mean --run?", fs.Args()))
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
	defer flush(context.WithoutCancel(ctx))
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	m, err := mesh.Start(ctx, mesh.Options{
		Config:         cfg,
		Ephemeral:      *message != "",
		TracerProvider: providers,
		Logger:         slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
	})
	if err != nil {
		return err
	}
	defer m.Close()
	fmt.Fprintln(stderr, "agentmesh dev: the mesh is up")
	for _, name := range m.Services() {
		fmt.Fprintf(stderr, "  %-12s %s\n", name, m.Addr(name))
	}
	if u := m.NATSURL(); u != "" {
		fmt.Fprintf(stderr, "  %-12s %s (embedded, JetStream)\n", "nats", u)
	}
	addr := m.Addr(mesh.Orchestrator)
	if *message == "" {
		fmt.Fprintf(stderr, "run an agent with: agentmesh run --addr %s \"What is 6 times 7?\" (Ctrl-C stops the mesh)\n", addr)
		<-ctx.Done()
		return nil
	}
	client, closeConn, err := connect(addr)
	if err != nil {
		return err
	}
	defer closeConn()
	return streamRun(ctx, client, addr, &agentv1.RunRequest{Message: *message, UserId: "cli"}, false, stdout, stderr)
}
