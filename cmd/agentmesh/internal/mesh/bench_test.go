package mesh_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// BenchmarkCheckpoints measures what durability costs: the same two-turn run (a calculator
// call, then the answer, on the built-in rules model) through the whole mesh with checkpoints
// on and off. Compare the two with benchstat (`make bench`), which reports the ratio.
func BenchmarkCheckpoints(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run("checkpoints="+strconv.FormatBool(on), func(b *testing.B) {
			cfg := config.Default()
			cfg.Durability.Checkpoints = on
			m, err := mesh.Start(context.Background(), mesh.Options{Config: cfg, Ephemeral: true, StoreDir: b.TempDir(), Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(m.Close)
			conn, err := grpc.NewClient(m.Addr(mesh.Orchestrator), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = conn.Close() })
			client := agentv1.NewAgentServiceClient(conn)
			turns := 0
			for b.Loop() {
				res, err := client.Run(b.Context(), &agentv1.RunRequest{Message: "What is 6 times 7?"})
				if err != nil || res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
					b.Fatalf("run: %v %v", res.GetOutcome(), err)
				}
				turns += int(res.GetTurns())
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(turns), "ns/turn")
		})
	}
}
