package meshproc

import (
	"context"
	"errors"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// retryInterval is the pause before a Client sends a failed request to the next replica.
const retryInterval = 50 * time.Millisecond

// Client calls AgentService the way an application behind a load balancer does: a request that
// fails with UNAVAILABLE (its replica died or is shutting down) goes to the next replica.
type Client struct {
	replicas []*Service
}

// Client returns a Client of the mesh's orchestrator replicas.
func (m *Mesh) Client() *Client { return &Client{replicas: m.replicas} }

// Attempt is one call a Client made.
type Attempt struct {
	// Replica is the name of the replica called.
	Replica string
	// Err is what the call returned.
	Err error
}

// Run sends req to the replica at index first (modulo the number of replicas) and, as long as
// the answer is UNAVAILABLE, sends the same request again to the next replica in turn, until one
// answers otherwise or ctx ends. req must carry an idempotency_key, so that a retry attaches to
// the run the first attempt started instead of starting another. Run returns the result and
// every attempt that failed.
func (c *Client) Run(ctx context.Context, first int, req *agentv1.RunRequest) (*typev1.RunResult, []Attempt, error) {
	if req.GetIdempotencyKey() == "" {
		return nil, nil, errors.New("meshproc: a retried Run needs an idempotency_key")
	}
	var failed []Attempt
	for i := first; ; i++ {
		r := c.replicas[i%len(c.replicas)]
		res, err := r.Agent().Run(ctx, req)
		if status.Code(err) != codes.Unavailable {
			return res, failed, err
		}
		failed = append(failed, Attempt{Replica: r.name, Err: err})
		timer := time.NewTimer(retryInterval)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, failed, ctx.Err()
		}
	}
}
