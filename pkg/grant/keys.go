package grant

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

// GenerateKey returns a new Ed25519 key pair for signing grants.
func GenerateKey() (ed25519.PublicKey, ed25519.PrivateKey) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err) // crypto/rand never fails
	}
	return pub, priv
}

// WriteKeys writes the key pair as PEM files: the private key (PKCS #8, mode 0600) to
// privPath and the public key (PKIX) to pubPath.
func WriteKeys(privPath, pubPath string, pub ed25519.PublicKey, priv ed25519.PrivateKey) error {
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return err
	}
	if err := os.WriteFile(privPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644)
}

// LoadSigner reads a PEM PKCS #8 Ed25519 private key.
func LoadSigner(path string) (*Signer, error) {
	der, err := readPEM(path, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	key, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	priv, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: a %T, not an Ed25519 private key", path, key)
	}
	return NewSigner(priv), nil
}

// LoadVerifier reads a PEM PKIX Ed25519 public key.
func LoadVerifier(path string) (*Verifier, error) {
	der, err := readPEM(path, "PUBLIC KEY")
	if err != nil {
		return nil, err
	}
	key, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	pub, ok := key.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%s: a %T, not an Ed25519 public key", path, key)
	}
	return NewVerifier(pub), nil
}

// readPEM returns the DER bytes of the one PEM block of the given type in path.
func readPEM(path, blockType string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != blockType {
		return nil, fmt.Errorf("%s: want a PEM %q block", path, blockType)
	}
	return block.Bytes, nil
}
