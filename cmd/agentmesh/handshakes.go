package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"reflect"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// handshakes are the transport credentials of a command's client, which keep how the TLS
// handshake of its last connection ended, and put the refusal of credentials in the error of a
// call that failed UNAVAILABLE (a *handshakeRefused). gRPC ends such a call with the handshake's
// failure as text only, in its status, so the CLI told a refused certificate from a network
// failure by words of that text; the failure itself has types that say it (refusedCredentials).
//
// Under TLS 1.3 a server refuses the client's certificate (of a CA it does not take, revoked,
// expired, or none where it requires one) after the client's side of the handshake completed:
// the client sends its certificate in its last flight and takes the handshake as done, and the
// server's alert arrives only at its next read. gRPC's connection writes its preface at once,
// and a server that closes the connection with that write unread resets it: the call failed
// UNAVAILABLE, often with "broken pipe" or a reset where the alert was lost, and the handshake
// recorded no failure. So, when a call fails UNAVAILABLE after a TLS 1.3 handshake that
// completed, the credentials probe its server once (probe): a new handshake that writes nothing
// after it, and reads the server's first answer, the alert of a server that refuses the
// client's certificate, data from one that takes it. With nothing written after the client's
// last flight, which the server reads whole, the server closes the connection with nothing
// unread, and its alert arrives (TestHandshakeRefusals tries every refusal 20 times).
type handshakes struct {
	credentials.TransportCredentials

	mu   sync.Mutex
	last *handshake // the last handshake; nil before the first
}

// handshake is how one handshake of handshakes ended.
type handshake struct {
	failed error // its failure; nil when it completed

	// server and authority are the server and authority of a TLS 1.3 handshake that completed,
	// which its server may still have refused: probe; server is nil otherwise.
	server    net.Addr
	authority string
	probed    sync.Once
	alert     error // what the probe learnt: the server's alert, or nil
}

// probeTimeout bounds a probe: a server answers a handshake that completed at once, with an alert
// or with its first data (a gRPC server's settings); one that answers nothing, as a server that
// waits for the client to speak first, tells nothing.
const probeTimeout = 5 * time.Second

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
	last := &handshake{failed: err}
	if info, ok := info.(credentials.TLSInfo); ok && err == nil && info.State.Version == tls.VersionTLS13 {
		last.server, last.authority = raw.RemoteAddr(), authority
	}
	h.mu.Lock()
	h.last = last
	h.mu.Unlock()
	return conn, info, err
}

// Clone returns credentials of their own, recording their own handshakes.
func (h *handshakes) Clone() credentials.TransportCredentials {
	return recordHandshakes(h.TransportCredentials.Clone())
}

// refused returns the failure of the last handshake when it refused credentials; for a TLS 1.3
// handshake that completed, the alert with which its server refused the client's certificate,
// which a probe learns (once per handshake); else nil.
func (h *handshakes) refused(ctx context.Context) error {
	h.mu.Lock()
	last := h.last
	h.mu.Unlock()
	switch {
	case last == nil:
		return nil
	case refusedCredentials(last.failed):
		return last.failed
	case last.server == nil:
		return nil
	}
	last.probed.Do(func() { last.alert = h.probe(ctx, last) })
	return last.alert
}

// probe makes a new handshake with the server of last, as the credentials make theirs, writes
// nothing after it, and reads the server's first answer: it returns the read's error when it is
// an alert the server sent (receivedAlert), the refusal of the client's certificate that the
// connection of last may have lost; nil when the server sends data (it took the certificate),
// closes the connection or answers nothing within probeTimeout, or cannot be reached.
func (h *handshakes) probe(ctx context.Context, last *handshake) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	raw, err := new(net.Dialer).DialContext(ctx, last.server.Network(), last.server.String())
	if err != nil {
		return nil
	}
	defer raw.Close()
	conn, _, err := h.TransportCredentials.ClientHandshake(ctx, last.authority, raw)
	if err != nil {
		return nil // not the handshake of last: the server changed since
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetReadDeadline(deadline); err != nil {
		return nil
	}
	if _, err := conn.Read(make([]byte, 1)); err != nil {
		if _, ok := receivedAlert(err); ok {
			return err
		}
	}
	return nil
}

// explain returns err, the error of a call made with ctx, as a *handshakeRefused when the call
// failed UNAVAILABLE and the last handshake refused credentials.
func (h *handshakes) explain(ctx context.Context, err error) error {
	if status.Code(err) != codes.Unavailable {
		return err
	}
	if cause := h.refused(ctx); cause != nil {
		return &handshakeRefused{call: err, cause: cause}
	}
	return err
}

// unary explains the error of a unary call.
func (h *handshakes) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption,
) error {
	return h.explain(ctx, invoker(ctx, method, req, reply, cc, opts...))
}

// stream explains the errors of a stream.
func (h *handshakes) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption,
) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, h.explain(ctx, err)
	}
	return explainedStream{ClientStream: s, ctx: ctx, h: h}, nil
}

// explainedStream is a client stream whose errors are explained, with the context of the call
// that opened it (the stream's own ends with its failure).
type explainedStream struct {
	grpc.ClientStream
	ctx context.Context
	h   *handshakes
}

// SendMsg sends m.
func (s explainedStream) SendMsg(m any) error { return s.h.explain(s.ctx, s.ClientStream.SendMsg(m)) }

// RecvMsg receives m.
func (s explainedStream) RecvMsg(m any) error { return s.h.explain(s.ctx, s.ClientStream.RecvMsg(m)) }

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

// reason says why the handshake failed: the alert the server sent, when it sent one (the call's
// status may say "broken pipe" then), else msg, what the call's error says.
func (e *handshakeRefused) reason(msg string) string {
	if _, ok := receivedAlert(e.cause); ok {
		return e.cause.Error()
	}
	return msg
}

// tlsAlertOp is the Op of the *net.OpError in which crypto/tls returns a TLS alert that the
// peer sent (a server refusing the client's certificate); TestHandshakeRefusals pins it.
const tlsAlertOp = "remote error"

// receivedAlert returns the TLS alert that err says the peer sent. crypto/tls returns one as a
// *net.OpError of Op tlsAlertOp whose Err is the alert, of its unexported type alert, a uint8
// as the exported tls.AlertError is (which it returns for the alerts it sends, on QUIC only):
// the alert is read from that value, not from its text. TestHandshakeRefusals pins it.
func receivedAlert(err error) (tls.AlertError, bool) {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != tlsAlertOp || op.Err == nil {
		return 0, false
	}
	v := reflect.ValueOf(op.Err)
	if v.Kind() != reflect.Uint8 || v.Type().PkgPath() != "crypto/tls" {
		return 0, false
	}
	return tls.AlertError(v.Uint()), true
}

// TLS alerts (RFC 8446 §6.2) with which a server refuses the client's certificate; crypto/tls
// exports no names for them.
const (
	alertBadCertificate         tls.AlertError = 42
	alertUnsupportedCertificate tls.AlertError = 43
	alertCertificateRevoked     tls.AlertError = 44
	alertCertificateExpired     tls.AlertError = 45
	alertCertificateUnknown     tls.AlertError = 46
	alertUnknownCA              tls.AlertError = 48
	alertCertificateRequired    tls.AlertError = 116 // TLS 1.3: none was sent
)

// certificateRefused reports whether err says the server refused the client's certificate, or
// its lack, with one of the alerts above.
func certificateRefused(err error) bool {
	a, ok := receivedAlert(err)
	switch a {
	case alertBadCertificate, alertUnsupportedCertificate, alertCertificateRevoked, alertCertificateExpired,
		alertCertificateUnknown, alertUnknownCA, alertCertificateRequired:
		return ok
	}
	return false
}

// refusedCredentials reports whether err, the failure of a TLS handshake, is one side refusing
// the other's credentials, or the server speaking no TLS: a certificate that does not verify
// against AGENTMESH_CA or the mesh CA, a server of another mesh identity
// (auth.ServerCertError), a server that answers in plaintext, or an alert the server sent. A
// connection cut during the handshake (EOF, a reset, a timeout) is the network's.
func refusedCredentials(err error) bool {
	if err == nil {
		return false
	}
	switch {
	case errors.As(err, new(*tls.CertificateVerificationError)),
		errors.As(err, new(x509.UnknownAuthorityError)),
		errors.As(err, new(x509.CertificateInvalidError)),
		errors.As(err, new(x509.HostnameError)),
		errors.As(err, new(*auth.ServerCertError)),
		errors.As(err, new(tls.RecordHeaderError)),
		errors.As(err, new(tls.AlertError)):
		return true
	}
	_, alert := receivedAlert(err)
	return alert
}
