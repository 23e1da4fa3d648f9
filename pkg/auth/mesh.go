package auth

import (
	"context"
	"crypto/x509"
	"log/slog"
	"regexp"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// MeshTrustDomain is the trust domain of mesh identities.
const MeshTrustDomain = "agentmesh"

// meshIDPrefix starts every mesh identity.
const meshIDPrefix = "spiffe://" + MeshTrustDomain + "/"

// meshService is what a mesh identity may name: a service name.
var meshService = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// MeshID returns the mesh identity of a service: the SPIFFE ID
// "spiffe://agentmesh/<service>" that the one URI name of its certificate holds, e.g.
// "spiffe://agentmesh/orchestrator". Every service of the mesh has a certificate signed by the
// mesh CA that names its identity; a stage serving mutual TLS takes calls only from mesh
// identities, and a service calling another accepts only a mesh identity as the server.
func MeshID(service string) string { return meshIDPrefix + service }

// ParseMeshID returns the service of a mesh identity, "spiffe://agentmesh/<service>" (MeshID);
// ok is false for any other text.
func ParseMeshID(id string) (service string, ok bool) {
	service, ok = strings.CutPrefix(id, meshIDPrefix)
	if !ok || !meshService.MatchString(service) {
		return "", false
	}
	return service, true
}

// MeshService returns the service whose mesh identity cert names (see MeshID); ok is false
// when cert names none. As SPIFFE requires, a mesh identity is the certificate's only URI name.
// MeshService does not verify the certificate: give it one from a verified chain.
func MeshService(cert *x509.Certificate) (service string, ok bool) {
	if len(cert.URIs) != 1 {
		return "", false
	}
	return ParseMeshID(cert.URIs[0].String())
}

// MeshIdentity returns the service whose mesh identity the call's peer authenticated with: the
// client certificate the server verified (a stage server verifies it against the mesh CA,
// Options.Mesh of pkg/server). ok is false for a call without a verified certificate or with one
// that names no mesh identity.
func MeshIdentity(ctx context.Context) (service string, ok bool) {
	cert := clientCert(ctx)
	if cert == nil {
		return "", false
	}
	return MeshService(cert)
}

// meshOpen reports whether a method of a stage is served to every peer the TLS handshake
// accepted, mesh identity or not: the health service, so that probes and load balancers check
// a stage with any certificate of the mesh CA.
func meshOpen(method string) bool { return strings.HasPrefix(method, "/grpc.health.v1.Health/") }

// checkMesh returns the error that refuses a call from a peer that is not a mesh identity, nil
// for a mesh identity: UNAUTHENTICATED without a verified client certificate, PERMISSION_DENIED
// with one that names no mesh identity.
func checkMesh(ctx context.Context) error {
	cert := clientCert(ctx)
	if cert == nil {
		return stageerr.Errorf(stageerr.ErrUnauthenticated.Code, "stages take calls only from the services of the mesh: present a certificate of the mesh CA")
	}
	if _, ok := MeshService(cert); !ok {
		return stageerr.Errorf(stageerr.ErrPermissionDenied.Code,
			"stages take calls only from the services of the mesh: the certificate of %q names no mesh identity (a URI name %s<service>)", cert.Subject.String(), meshIDPrefix)
	}
	return nil
}

// MeshAdmission refuses every call but health (see MeshIdentity) from a peer that is not a
// mesh identity, logging the refusal with the certificate's subject (at warning level at most
// once per RefusalInterval for one peer and reason): UNAUTHENTICATED without a verified client
// certificate, PERMISSION_DENIED with one that names no mesh identity.
func MeshAdmission(log *slog.Logger) Admission {
	return (*MeshTLS)(nil).Admission(log)
}

// Admission is MeshAdmission for the stage server of m's ServerConfig. With CRLs
// (MeshFiles.CRL) it refuses too, UNAUTHENTICATED, a call on a connection whose client
// certificate (or a CA certificate of its chain) the CRLs revoke now, though they did not at the
// connection's handshake, naming the certificate and its serial as the handshake's refusal
// does. The CRLs are those the handshakes follow, read again at most every reload interval, and
// never at a call; without CRLs the check costs nothing.
func (m *MeshTLS) Admission(log *slog.Logger) Admission {
	refusals := newRefusalLog(log)
	var crls *crls
	if m != nil {
		crls = m.crls
	}
	return func(ctx context.Context, method string) (context.Context, error) {
		if meshOpen(method) {
			return ctx, nil
		}
		err := checkMesh(ctx)
		if err == nil && crls != nil {
			err = crls.refuse(ctx)
		}
		if err != nil {
			refusals.refused(ctx, method, err)
			return nil, err
		}
		return ctx, nil
	}
}

// Holds reports whether Hold holds calls: m follows CRLs.
func (m *MeshTLS) Holds() bool { return m != nil && m.held != nil }

// Hold returns the context to serve a call of method of a stage in, which ends with the cause
// RevokedError returns (UNAUTHENTICATED, wrapping ErrRevoked) once the CRLs (MeshFiles.CRL),
// read again, list the client certificate of its connection: within the reload interval,
// whether or not other calls or handshakes come meanwhile. Call release when the call ends.
// Without CRLs, for a call without a verified client certificate, and for health (open to
// every certificate of the mesh CA, as Admission keeps it: a client's health checks of a
// connection go on), it is ctx as it is. As Authenticator.Hold, it starts no goroutine per
// call: one looks at the files while any call is held.
func (m *MeshTLS) Hold(ctx context.Context, method string) (held context.Context, release func()) {
	if !m.Holds() || meshOpen(method) {
		return ctx, noRelease
	}
	chains := peerChains(ctx)
	if chains == nil {
		return ctx, noRelease
	}
	return m.held.hold(ctx, &heldCall{chains: chains})
}
