package llmtest_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestStartTLSServesHTTP2: a server started with StartTLS answers over HTTP/2 and TLS, to a
// client that trusts its Certificate, as a hosted provider does.
func TestStartTLSServesHTTP2(t *testing.T) {
	s, err := llmtest.StartTLS(llmtest.Scenario{Match: "hello", Turns: []llmtest.Turn{{Content: "Hi there."}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Certificate() == nil {
		t.Fatal("no certificate")
	}
	roots := x509.NewCertPool()
	roots.AddCert(s.Certificate())
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	body := map[string]any{"model": "m", "messages": []map[string]any{{"role": "user", "content": "hello"}}}
	resp, data := post(t, &http.Client{Transport: tr}, s.URL()+"/chat/completions", body)
	if resp.ProtoMajor != 2 {
		t.Errorf("answered over %s, want HTTP/2", resp.Proto)
	}
	if c := decodeCompletion(t, resp, data); c.Choices[0].Message.Content == nil || *c.Choices[0].Message.Content != "Hi there." {
		t.Errorf("answer %+v", c.Choices[0].Message)
	}
	if errs := s.Errors(); len(errs) > 0 {
		t.Errorf("errors: %v", errs)
	}
	plain, err := llmtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if plain.Certificate() != nil {
		t.Error("a plain HTTP server has a certificate")
	}
}
