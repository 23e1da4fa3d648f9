package dial_test

import (
	"context"
	"testing"
	"time"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/fullstorydev/grpchan/inprocgrpc"
)

// TestInProcessDefaultDeadline: a call in process without a deadline gets the default one,
// as over the network.
func TestInProcessDefaultDeadline(t *testing.T) {
	const timeout = 2 * time.Second
	left := make(chan time.Duration, 1)
	ch := new(inprocgrpc.Channel)
	intentv1.RegisterIntentServiceServer(ch, &intent{parse: func(ctx context.Context) error {
		d, _ := ctx.Deadline() // the zero time without one: far in the past
		left <- time.Until(d)
		return nil
	}})
	c := intentv1.NewIntentServiceClient(dial.InProcess(ch, dial.WithTimeout(timeout)))
	if _, err := c.Parse(t.Context(), &intentv1.ParseRequest{Message: "hi"}); err != nil {
		t.Fatal(err)
	}
	if got := <-left; got <= 0 || got > timeout {
		t.Errorf("the handler saw %v left, want in (0, %v]", got, timeout)
	}
}
