package dial

import (
	"github.com/fullstorydev/grpchan"
	"github.com/fullstorydev/grpchan/inprocgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
)

// InProcess returns a connection over ch, a channel to services in this process (see
// server.InProcess), with what New gives a call that does not depend on the network: client
// spans (WithTracerProvider) with the trace context passed on in the call's metadata, and the
// default deadline (WithTimeout). The rest belongs to connections and does not apply: load
// balancing, health checking, the retry of UNAVAILABLE (WithoutRetry), keepalive, TLS
// (WithMesh), message size limits (WithMaxMessageBytes) and WithDialOptions. ch is the
// caller's own: InProcess sets its client stats handler.
func InProcess(ch *inprocgrpc.Channel, opts ...Option) grpc.ClientConnInterface {
	cfg := config{timeout: DefaultTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	ch.WithClientStatsHandler(otelgrpc.NewClientHandler(cfg.handlerOptions()...))
	return grpchan.InterceptClientConnUnary(ch, defaultDeadline(cfg.timeout))
}
