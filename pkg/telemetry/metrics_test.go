package telemetry_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/certs"
	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"golang.org/x/crypto/bcrypt"
)

// TestMetricsWebConfig: with a Prometheus web configuration, the metrics are served over TLS
// to a caller with the configured user's password only; without one, over plain HTTP to anyone.
func TestMetricsWebConfig(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA("metrics test CA")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Write(dir, "metrics", certs.Service("metrics"))
	if err != nil {
		t.Fatal(err)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte("scrape-secret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	config := writeFile(t, dir, "web.yml", fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  prometheus: %s\n", pair.Cert, pair.Key, hash))

	m, err := telemetry.ServeMetrics("agentmesh-test", telemetry.MetricsListener{Addr: "127.0.0.1:0", WebConfig: config})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(t.Context())
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	defer client.CloseIdleConnections()
	url := "https://" + m.Addr() + telemetry.MetricsPath
	for _, tc := range []struct {
		name, user, password string
		want                 int
	}{
		{"no password", "", "", http.StatusUnauthorized},
		{"wrong password", "prometheus", "guess", http.StatusUnauthorized},
		{"unknown user", "someone", "scrape-secret", http.StatusUnauthorized},
		{"the user's password", "prometheus", "scrape-secret", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, client, url, tc.user, tc.password)
			if code != tc.want {
				t.Fatalf("GET %s: %d, want %d", url, code, tc.want)
			}
			if code == http.StatusOK && !strings.Contains(body, `target_info{service_name="agentmesh-test"`) {
				t.Errorf("the metrics have no target_info of the service:\n%s", body)
			}
		})
	}
	t.Run("plain HTTP", func(t *testing.T) {
		if code, _ := get(t, http.DefaultClient, "http://"+m.Addr()+telemetry.MetricsPath, "prometheus", "scrape-secret"); code == http.StatusOK {
			t.Fatal("the metrics were served over plain HTTP")
		}
	})

	plain, err := telemetry.ServeMetrics("agentmesh-test", telemetry.MetricsListener{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Shutdown(t.Context())
	if code, _ := get(t, http.DefaultClient, "http://"+plain.Addr()+telemetry.MetricsPath, "", ""); code != http.StatusOK {
		t.Fatalf("plain HTTP without a web configuration: %d, want 200", code)
	}
}

// TestMetricsWebConfigRefused: a web configuration that does not load is an ErrWebConfig
// error naming the file, and nothing listens.
func TestMetricsWebConfigRefused(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, config string }{
		{"missing file", filepath.Join(dir, "absent.yml")},
		{"not YAML", writeFile(t, dir, "bad.yml", "tls_server_config: [")},
		{"unknown key", writeFile(t, dir, "unknown.yml", "tls_server_konfig: {}\n")},
		{"certificate missing", writeFile(t, dir, "nocert.yml", "tls_server_config:\n  cert_file: "+filepath.Join(dir, "absent.pem")+"\n  key_file: "+filepath.Join(dir, "absent-key.pem")+"\n")},
		{"password not a bcrypt hash", writeFile(t, dir, "plainpw.yml", "basic_auth_users:\n  prometheus: scrape-secret\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := telemetry.ServeMetrics("agentmesh-test", telemetry.MetricsListener{Addr: "127.0.0.1:0", WebConfig: tc.config})
			if err == nil {
				_ = m.Shutdown(t.Context())
				t.Fatal("served with a web configuration that does not load")
			}
			if !errors.Is(err, telemetry.ErrWebConfig) || !strings.Contains(err.Error(), tc.config) {
				t.Errorf("error %q, want an ErrWebConfig naming %s", err, tc.config)
			}
		})
	}
}

// writeFile writes content to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// get makes a GET of url with basic authentication when user is set, and returns the status
// code and body; a failed request is code 0.
func get(t *testing.T, client *http.Client, url, user, password string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}
