package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"sync"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// handshakes are the transport credentials of a command's client, which keep the failure of
// the TLS handshake of its last connection, and put it in the error of a call that failed
// UNAVAILABLE for it (a *handshakeRefused), when it refused credentials (refusedCredentials).
// gRPC ends such a call with the handshake's failure as text only, in its status, so the CLI
// told a refused certificate from a network failure by words of that text; the failure itself
// has types that say it.
type handshakes struct {
	credentials.TransportCredentials

	mu     sync.Mutex
	failed error // the failure of the last handshake; nil after one that succeeded
}

// recordHandshakes returns creds recording their handshakes.
func recordHandshakes(creds credentials.TransportCredentials) *handshakes {
	return &handshakes{TransportCredentials: creds}
}

// dialOptions are the options of a client with h: its credentials, and the interceptors that
// put a refusal in its calls' errors.
func (h *handshakes) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithTransportCredentials(h),
		grpc.WithChainUnaryInterceptor(h.unary), grpc.WithChainStreamInterceptor(h.stream)}
}

// ClientHandshake makes the handshake, and records how it ended.
func (h *handshakes) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := h.TransportCredentials.ClientHandshake(ctx, authority, raw)
	h.mu.Lock()
	h.failed = err
	h.mu.Unlock()
	return conn, info, err
}

// Clone returns credentials of their own, recording their own handshakes.
func (h *handshakes) Clone() credentials.TransportCredentials {
	return recordHandshakes(h.TransportCredentials.Clone())
}

// refused returns the failure of the last handshake when it refused credentials, else nil.
func (h *handshakes) refused() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if refusedCredentials(h.failed) {
		return h.failed
	}
	return nil
}

// explain returns err, the error of a call, as a *handshakeRefused when the call failed
// UNAVAILABLE and the last handshake refused credentials.
func (h *handshakes) explain(err error) error {
	if status.Code(err) != codes.Unavailable {
		return err
	}
	if cause := h.refused(); cause != nil {
		return &handshakeRefused{call: err, cause: cause}
	}
	return err
}

// unary explains the error of a unary call.
func (h *handshakes) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption,
) error {
	return h.explain(invoker(ctx, method, req, reply, cc, opts...))
}

// stream explains the errors of a stream.
func (h *handshakes) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption,
) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, h.explain(err)
	}
	return explainedStream{ClientStream: s, h: h}, nil
}

// explainedStream is a client stream whose errors are explained.
type explainedStream struct {
	grpc.ClientStream
	h *handshakes
}

// SendMsg sends m.
func (s explainedStream) SendMsg(m any) error { return s.h.explain(s.ClientStream.SendMsg(m)) }

// RecvMsg receives m.
func (s explainedStream) RecvMsg(m any) error { return s.h.explain(s.ClientStream.RecvMsg(m)) }

// handshakeRefused is the error of a call that failed UNAVAILABLE because the TLS handshake of
// its connection refused credentials: the call's status, and the handshake's failure.
type handshakeRefused struct {
	call  error // the call's error, a gRPC status
	cause error // the handshake's failure
}

// Error is the call's error.
func (e *handshakeRefused) Error() string { return e.call.Error() }

// GRPCStatus is the call's status, UNAVAILABLE.
func (e *handshakeRefused) GRPCStatus() *status.Status { return status.Convert(e.call) }

// Unwrap returns the handshake's failure.
func (e *handshakeRefused) Unwrap() error { return e.cause }

// tlsAlertOp is the Op of the *net.OpError in which crypto/tls returns a TLS alert that the
// peer sent (a server refusing the client's certificate), whose type it does not export;
// TestHandshakeRefusals pins it.
const tlsAlertOp = "remote error"

// refusedCredentials reports whether err, the failure of a TLS handshake, is one side refusing
// the other's credentials, or the server speaking no TLS: a certificate that does not verify
// against AGENTMESH_CA or the mesh CA, a server of another mesh identity
// (auth.ServerCertError), a server that answers in plaintext, or an alert the server sent. A
// connection cut during the handshake (EOF, a reset, a timeout) is the network's.
func refusedCredentials(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	switch {
	case errors.As(err, new(*tls.CertificateVerificationError)),
		errors.As(err, new(x509.UnknownAuthorityError)),
		errors.As(err, new(x509.CertificateInvalidError)),
		errors.As(err, new(x509.HostnameError)),
		errors.As(err, new(*auth.ServerCertError)),
		errors.As(err, new(tls.RecordHeaderError)),
		errors.As(err, new(tls.AlertError)):
		return true
	case errors.As(err, &op):
		return op.Op == tlsAlertOp
	}
	return false
}
