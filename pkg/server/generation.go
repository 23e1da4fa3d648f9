package server

import (
	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
)

// DialGeneration connects a stage binary that asks models (intent, planning, observation,
// memory) to the generation service at GENERATION_ADDR, else services.generation: over the
// mesh's mutual TLS when tls.ca is set, with grpc.max_message_bytes, and without gRPC's retry of
// UNAVAILABLE, since every Generate or Embed is a paid provider request that is accounted once.
// The connection lives as long as the process. A bad address or TLS setup wraps exitcode.Invalid.
func DialGeneration(cfg *config.Config) (generationv1.GenerationServiceClient, error) {
	mesh, err := cfg.TLS.Mesh()
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Invalid, err)
	}
	conn, err := dial.New(Env("GENERATION_ADDR", cfg.Services.Generation), dial.WithoutRetry(), dial.WithMesh(mesh),
		dial.WithPeer("generation"), dial.WithMaxMessageBytes(cfg.GRPC.MaxMessageBytes))
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Invalid, err)
	}
	return generationv1.NewGenerationServiceClient(conn), nil
}
