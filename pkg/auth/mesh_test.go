package auth_test

import (
	"crypto/x509"
	"net/url"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/auth"
)

func TestMeshService(t *testing.T) {
	for _, tc := range []struct {
		uris    []string
		service string
		ok      bool
	}{
		{[]string{auth.MeshID("orchestrator")}, "orchestrator", true},
		{[]string{"spiffe://agentmesh/context-2"}, "context-2", true},
		{nil, "", false},
		{[]string{"spiffe://agentmesh/memory", "spiffe://agentmesh/action"}, "", false}, // SPIFFE: one URI name
		{[]string{"spiffe://example.org/memory"}, "", false},
		{[]string{"spiffe://agentmesh/"}, "", false},
		{[]string{"spiffe://agentmesh/ns/memory"}, "", false},
		{[]string{"spiffe://agentmesh/Memory"}, "", false},
		{[]string{"https://agentmesh/memory"}, "", false},
	} {
		cert := &x509.Certificate{}
		for _, u := range tc.uris {
			parsed, err := url.Parse(u)
			if err != nil {
				t.Fatal(err)
			}
			cert.URIs = append(cert.URIs, parsed)
		}
		if service, ok := auth.MeshService(cert); service != tc.service || ok != tc.ok {
			t.Errorf("MeshService(%v) = %q, %v; want %q, %v", tc.uris, service, ok, tc.service, tc.ok)
		}
	}
}
