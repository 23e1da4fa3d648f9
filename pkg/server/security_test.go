package server

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/config"
)

func TestCheckExposure(t *testing.T) {
	for _, tc := range []struct {
		addr                    string
		authenticated, insecure bool
		exposed                 bool
	}{
		{"127.0.0.1:7000", false, false, false},
		{"[::1]:7000", false, false, false},
		{"localhost:7000", false, false, false},
		{":7000", false, false, true},
		{"0.0.0.0:7000", false, false, true},
		{"10.0.0.5:7000", false, false, true},
		{"0.0.0.0:7000", true, false, false},
		{"0.0.0.0:7000", false, true, false},
		{"not an address", false, false, true},
	} {
		err := CheckExposure(tc.addr, tc.authenticated, tc.insecure)
		if got := errors.Is(err, ErrExposed); got != tc.exposed {
			t.Errorf("CheckExposure(%q, authenticated %v, insecure %v) = %v, want exposed %v", tc.addr, tc.authenticated, tc.insecure, err, tc.exposed)
		}
	}
}

// TestPublicSecurityNamesTheSettingAtFault: a certificate, key or client CA file that does not
// load is refused naming its setting, as tls.ca's is; a missing file was "stat PATH: no such
// file or directory", which names none.
func TestPublicSecurityNamesTheSettingAtFault(t *testing.T) {
	dev := newDevPKI(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		name string
		a    config.Auth
		tls  config.TLS
		want string
	}{
		{"missing certificate", config.Auth{}, config.TLS{Cert: missing, Key: dev.orchestrator.Key}, "tls.cert and tls.key: "},
		{"missing key", config.Auth{}, config.TLS{Cert: dev.orchestrator.Cert, Key: missing}, "tls.cert and tls.key: "},
		{"missing client CA", config.Auth{ClientCA: missing}, config.TLS{Cert: dev.orchestrator.Cert, Key: dev.orchestrator.Key}, "auth.client_ca: "},
	} {
		_, _, err := PublicSecurity(tc.a, tc.tls)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), missing) {
			t.Errorf("%s: %v, want an error naming %q and the file", tc.name, err, strings.TrimSuffix(tc.want, ": "))
		}
	}
}

// TestCRLErrorsNameTheSetting: a file of CRLs that is missing, holds no CRL, or holds a CRL
// that no CA of its CA file signed is refused naming its setting: auth.client_crl for the
// public API's client certificates, tls.crl for the mesh (an invalid configuration, exit 4).
// The mesh CA's own CRL loads.
func TestCRLErrorsNameTheSetting(t *testing.T) {
	dev := newDevPKI(t)
	missing := filepath.Join(t.TempDir(), "missing.crl")
	for _, tc := range []struct {
		name, file, want string
	}{
		{"missing", missing, missing},
		{"no CRL", dev.badCRL, "neither PEM"},
		{"another CA's", dev.otherCRL, `the CRL of "CN=other CA" (1 of 1) is not signed by a CA of ` + dev.ca},
	} {
		_, _, err := PublicSecurity(config.Auth{ClientCA: dev.ca, ClientCRL: tc.file},
			config.TLS{Cert: dev.orchestrator.Cert, Key: dev.orchestrator.Key})
		if err == nil || !strings.HasPrefix(err.Error(), "auth.client_crl: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("auth.client_crl %s: %v, want an error naming auth.client_crl and saying %q", tc.name, err, tc.want)
		}
		_, err = config.TLS{CA: dev.ca, Cert: dev.intent.Cert, Key: dev.intent.Key, CRL: tc.file}.Mesh()
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "tls.crl: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("tls.crl %s: %v, want an invalid configuration naming tls.crl and saying %q", tc.name, err, tc.want)
		}
	}
	if _, _, err := PublicSecurity(config.Auth{ClientCA: dev.ca, ClientCRL: dev.crl},
		config.TLS{Cert: dev.orchestrator.Cert, Key: dev.orchestrator.Key}); err != nil {
		t.Errorf("auth.client_crl of the client CA: %v", err)
	}
	if m, err := (config.TLS{CA: dev.ca, Cert: dev.intent.Cert, Key: dev.intent.Key, CRL: dev.crl}).Mesh(); err != nil || m == nil {
		t.Errorf("tls.crl of the mesh CA: %v", err)
	}
}
