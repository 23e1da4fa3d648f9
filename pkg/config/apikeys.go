package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"gopkg.in/yaml.v3"
)

// apiKeysFile is the document auth.api_keys_file names: its api_keys take the form of
// auth.api_keys.
type apiKeysFile struct {
	APIKeys []APIKey `yaml:"api_keys"`
}

// FileKeys reads the API keys of auth.api_keys_file, as pkg/auth takes them. A key the file
// does not know (a misspelt field) is an error, as it is in the configuration.
func (a Auth) FileKeys() ([]auth.Key, error) {
	data, err := os.ReadFile(a.APIKeysFile)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f apiKeysFile
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", a.APIKeysFile, err)
	}
	return Auth{APIKeys: f.APIKeys}.Keys(), nil
}

// Authenticator returns the authenticator of the public API: of auth.api_keys, or of the
// keys of auth.api_keys_file, followed (auth.FollowKeys: a key taken out of the file is
// refused within auth.ReloadInterval, and the calls held open with it end); with client_ca,
// client certificates authenticate too, with the roles CertRoles says.
func (a Auth) Authenticator() (*auth.Authenticator, error) {
	certs, err := a.CertRoles()
	if err != nil {
		return nil, err
	}
	if a.APIKeysFile == "" {
		return auth.New(a.Keys(), certs)
	}
	authn, err := auth.FollowKeys(a.APIKeysFile, 0, a.FileKeys, certs)
	if err != nil {
		return nil, fmt.Errorf("api_keys_file: %w", err)
	}
	return authn, nil
}

// CertRoles returns the roles client certificates grant, as pkg/auth takes them: none with
// client_roles: none, the mapping of client_ou_roles when it is set, else those their OUs
// name; nil without client_ca, whose certificates authenticate no one. A mapping to an
// unknown role is an error naming its entry (client_ou_roles["OU"]).
func (a Auth) CertRoles() (*auth.CertRoles, error) {
	switch {
	case a.ClientCA == "":
		return nil, nil
	case a.ClientRoles == ClientRolesNone:
		return auth.NoCertRoles(), nil
	case len(a.ClientOURoles) > 0:
		return auth.CertRolesByOU(a.ClientOURoles)
	default:
		return &auth.CertRoles{}, nil
	}
}
